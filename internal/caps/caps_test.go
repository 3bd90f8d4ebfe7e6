package caps

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Have agrees with the effective set /proc/self/status shows, capability by capability.
func TestHave(t *testing.T) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var eff uint64
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			if eff, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []uint{unix.CAP_CHOWN, unix.CAP_SYS_ADMIN, unix.CAP_SYS_NICE, unix.CAP_BPF, unix.CAP_PERFMON} {
		have, known := Have(c)
		if want := eff&(1<<c) != 0; !known || have != want {
			t.Errorf("capability %d: Have says %v (known %v), /proc/self/status %v", c, have, known, want)
		}
	}
	if all, _ := Have(unix.CAP_SYS_NICE, unix.CAP_BPF); all != (eff&(1<<unix.CAP_SYS_NICE) != 0 && eff&(1<<unix.CAP_BPF) != 0) {
		t.Errorf("Have of two capabilities says %v", all)
	}
}
