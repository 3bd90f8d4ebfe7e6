package container

import (
	"strings"
	"testing"
)

const id = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"

// Samples of /proc/PID/cgroup as each runtime leaves it, on cgroup v1, v2 and hybrid
// hosts; ID is where the container's id stands.
var samples = []struct {
	name, cgroup, want string
}{
	{"docker, cgroup v1, cgroupfs driver", `12:pids:/docker/ID
11:memory:/docker/ID
1:name=systemd:/docker/ID
0::/system.slice/containerd.service`, id},
	{"docker, cgroup v1, systemd driver", `10:devices:/system.slice/docker-ID.scope
2:cpuacct,cpu:/system.slice/docker-ID.scope
1:name=systemd:/system.slice/docker-ID.scope`, id},
	{"docker, cgroup v2, systemd driver", `0::/system.slice/docker-ID.scope`, id},
	{"docker, cgroup v2, cgroupfs driver", `0::/docker/ID`, id},
	{"kubernetes containerd, cgroup v1", `11:memory:/kubepods/burstable/pod2f0c1c3a-8d7e-4a8e-9a2b-4c3a1f0e9d11/ID
1:name=systemd:/kubepods/burstable/pod2f0c1c3a-8d7e-4a8e-9a2b-4c3a1f0e9d11/ID`, id},
	{"kubernetes containerd, cgroup v2, systemd driver", `0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod2f0c1c3a_8d7e_4a8e_9a2b_4c3a1f0e9d11.slice/cri-containerd-ID.scope`, id},
	{"kubernetes CRI-O, cgroup v2", `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod5b0c1a2e_1f3d_4c5b_8a9e_7d6c5b4a3f21.slice/crio-ID.scope`, id},
	{"kubernetes CRI-O, cgroup v1, cgroupfs", `9:memory:/kubepods/besteffort/pod5b0c1a2e-1f3d-4c5b-8a9e-7d6c5b4a3f21/crio-ID`, id},
	{"podman rootful, cgroup v2", `0::/machine.slice/libpod-ID.scope/container`, id},
	{"podman rootless, cgroup v2", `0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-ID.scope/container`, id},
	{"podman, cgroup v1, cgroupfs manager (this machine's hybrid hierarchy)", `9:name=systemd:/libpod_parent/libpod-ID
4:memory:/libpod_parent/libpod-ID
0::/`, id},
	{"podman's monitor, conmon", `0::/machine.slice/libpod-conmon-ID.scope`, ""},
	{"host process, cgroup v2", `0::/user.slice/user-1000.slice/session-3.scope`, ""},
	{"host process, hybrid, in a 32-digit sandbox group", `4:memory:/process_api/c801ed42c706165da1ebd51c9963d1e9
0::/`, ""},
	{"empty", ``, ""},
	{"garbage", "not a cgroup file\n::::\n", ""},
}

func TestID(t *testing.T) {
	for _, s := range samples {
		got := ID(strings.NewReader(strings.ReplaceAll(s.cgroup, "ID", id)))
		if got != s.want {
			t.Errorf("%s: %q, want %q", s.name, got, s.want)
		}
	}
}
