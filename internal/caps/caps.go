// Package caps reads this process's effective capabilities.
package caps

import "golang.org/x/sys/unix"

// Have says whether the calling thread has every capability in cs (unix.CAP_*) in its
// effective set; known is false when the kernel would not say.
func Have(cs ...uint) (have, known bool) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, false
	}
	for _, c := range cs {
		if data[c/32].Effective&(1<<(c%32)) == 0 {
			return false, true
		}
	}
	return true, true
}
