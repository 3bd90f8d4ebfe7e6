// Package vm boots Debian's kernels under qemu's software emulation, from an initramfs,
// so that end-to-end tests run the collector and llama.cpp inside kernels other than the
// host's: the x86-64 5.10, 6.1 and 6.12 that make testenv puts under .testenv/kernels, and
// the arm64 6.1 and 6.12 under .testenv/kernels-arm64. A guest runs a test's shell script
// with busybox as its only userland, and the files the script leaves in /out come back to
// the host over a serial port.
package vm

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/profinfer/profinfer/internal/testbench"
)

// Kernel is one kernel of the matrix.
type Kernel struct {
	Arch    string // the machine it runs on, as GOARCH names it: amd64, arm64
	Name    string // the series, as its directory is named: 5.10, 6.1, 6.12
	Vmlinuz string // the image as Debian ships it
	// Vmlinux is the ELF kernel unpacked from Vmlinuz, or "" where there is none. qemu boots
	// it directly (PVH), without decompressing an image under emulation: that takes up to
	// five seconds, half of a boot of Debian's xz-compressed 5.10 and 6.1.
	Vmlinux string
	Release string // what uname -r says in the guest, such as 5.10.0-32-amd64
	Busybox string // the guest's userland: Debian's busybox-static for Arch
}

// machine is how qemu emulates one architecture.
type machine struct {
	qemu, apt string   // the emulator, and the Debian package it is in
	args      []string // the machine and its CPU
	console   string   // the guest's serial console
	// results is the serial port the results go out on: the console itself where the
	// machine has one port, after the kernel's messages to it are silenced.
	results string
	kernels string // the directory of env.Root that holds its kernels
	busybox string // where its busybox-static is, relative to env.Root where not absolute
}

var machines = map[string]machine{
	// The host's own busybox; 5.10 and 6.1 boot from the ELF vmlinux.
	"amd64": {qemu: "qemu-system-x86_64", apt: "qemu-system-x86", args: []string{"-cpu", "max"},
		console: "ttyS0", results: "ttyS1", kernels: "kernels", busybox: Busybox},
	// virt has a single UART. QEMU's architected pointer authentication is slow to
	// emulate; its implementation-defined one is not.
	"arm64": {qemu: "qemu-system-aarch64", apt: "qemu-system-arm", args: []string{"-M", "virt", "-cpu", "max,pauth-impdef=on"},
		console: "ttyAMA0", results: "ttyAMA0", kernels: "kernels-arm64", busybox: "kernels-arm64/busybox"},
}

// Kernels lists the kernels for arch under env, oldest series first.
func Kernels(env *testbench.Env, arch string) ([]Kernel, error) {
	m, ok := machines[arch]
	if !ok {
		return nil, fmt.Errorf("vm: no machine for %s", arch)
	}
	dirs, err := os.ReadDir(filepath.Join(env.Root, m.kernels))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	busybox := m.busybox
	if !filepath.IsAbs(busybox) {
		busybox = filepath.Join(env.Root, busybox)
	}
	var ks []Kernel
	for _, d := range dirs {
		dir := filepath.Join(env.Root, m.kernels, d.Name())
		release, err := os.ReadFile(filepath.Join(dir, "release"))
		if err != nil {
			continue // not (yet) fully installed, or not a kernel
		}
		k := Kernel{Arch: arch, Name: d.Name(), Vmlinuz: filepath.Join(dir, "vmlinuz"),
			Release: strings.TrimSpace(string(release)), Busybox: busybox}
		if _, err := os.Stat(filepath.Join(dir, "vmlinux")); err == nil {
			k.Vmlinux = filepath.Join(dir, "vmlinux")
		}
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b Kernel) int { return compareVersions(a.Name, b.Name) })
	return ks, nil
}

// compareVersions orders dotted versions by number, so that 6.12 comes after 6.1.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if c := cmp.Compare(x, y); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// Require returns the test bench and its kernels for arch, or ends the test the way
// testbench.Missing does: skipped on a developer machine, failed in CI.
func Require(t testing.TB, arch string) (*testbench.Env, []Kernel) {
	t.Helper()
	env := testbench.Require(t)
	m := machines[arch]
	if _, err := exec.LookPath(m.qemu); err != nil {
		testbench.Missing(t, m.qemu+" (apt-get install "+m.apt+")")
	}
	ks, err := Kernels(env, arch)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) == 0 {
		testbench.Missing(t, "no "+arch+" kernels under "+filepath.Join(env.Root, m.kernels)+"; run `make testenv`")
	}
	if err := checkStatic(ks[0].Busybox); err != nil {
		testbench.Missing(t, err.Error()+"; run `make testenv`")
	}
	return env, ks
}

// Busybox is the x86-64 guests' userland: the host's busybox-static, which needs no
// libraries.
const Busybox = "/bin/busybox"

// checkStatic fails for a missing executable or one that needs a dynamic loader: the
// guest has none, and its kernel would only say that init could not be run.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", path)
		}
	}
	return nil
}

// Guest is one boot of a kernel that runs a script.
type Guest struct {
	Kernel Kernel
	// Files are the test's own files (executables, models, configuration), added to
	// busybox and /init in the guest's root; nil for none. Executables must be static.
	Files *Initramfs
	// Script is run by busybox sh as root once proc, sysfs, devtmpfs, tmpfs on /tmp,
	// tracefs, debugfs and bpffs are mounted and lo is up. What it writes to /out comes
	// back in Result.Out. The processes it leaves running are killed when it exits.
	Script  string
	CPUs    int    // 2 when zero
	Memory  string // qemu's -m; 3G when empty
	Cmdline string // more kernel parameters
}

// Result is what a boot left behind.
type Result struct {
	Console string        // the guest's ttyS0: kernel messages, and init's and the script's output
	Output  string        // the script's stdout and stderr alone
	Status  int           // the script's exit status
	Out     string        // the host directory holding what the script left in /out
	InitAt  time.Duration // the guest's uptime when /init started, the kernel's share of the boot
	Wall    time.Duration // from qemu's start to its exit
}

// initScript is the guest's /init, with @RESULTS@ the serial port the results go out on.
// It never exits: PID 1 exiting panics the kernel, which panic=-1 and -no-reboot turn into
// qemu's exit anyway, but without results.
const initScript = `#!/bin/sh
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
# Tracepoint ids are read from tracefs; bpffs is where programs and maps are pinned.
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
ip link set lo up
mkdir -p /out /run/vm
cut -d' ' -f1 /proc/uptime >/run/vm/uptime
echo "vm: init at $(cat /run/vm/uptime)s"
mkfifo /run/vm/fifo
tee /run/vm/output </run/vm/fifo &
tee=$!
sh /run/vm/script </dev/null >/run/vm/fifo 2>&1
echo $? >/run/vm/status
# Whatever the script left running is killed: it could hold the fifo open, and tee only
# ends once the last writer has gone.
for p in /proc/[0-9]*; do
  p=${p#/proc/}
  [ "$p" = 1 ] || [ "$p" = "$tee" ] || kill -9 "$p" 2>/dev/null
done
wait "$tee"
echo "vm: script exited $(cat /run/vm/status) at $(cut -d' ' -f1 /proc/uptime)s"
# Nothing from the kernel may fall among the results, where they share the console.
echo 1 >/proc/sys/kernel/printk
# raw: no newline translation on the way out.
stty -F /dev/@RESULTS@ raw
{ echo ` + beginMarker + `; tar cf - -C / out run/vm | gzip | base64; echo ` + endMarker + `; } >/dev/@RESULTS@
poweroff -f
`

const (
	beginMarker = "=====vm-results-begin====="
	endMarker   = "=====vm-results-end====="
)

// Run boots the guest in dir, which keeps the console log, the results as they came
// over the serial port, and their contents in dir/out, and returns once qemu has exited
// or ctx is done. Its error says why no results came back; the Result, with the
// console, is there for a failed boot as well.
func (g *Guest) Run(ctx context.Context, dir string) (*Result, error) {
	m, ok := machines[g.Kernel.Arch]
	if !ok {
		return nil, fmt.Errorf("vm: %s: no machine for %q", g.Kernel.Release, g.Kernel.Arch)
	}
	if err := checkStatic(g.Kernel.Busybox); err != nil {
		return nil, err
	}
	root := &Initramfs{}
	if err := root.File("/bin/busybox", g.Kernel.Busybox, 0o755); err != nil {
		return nil, err
	}
	// The init script's interpreter, before busybox installs its other applets.
	root.Symlink("/bin/sh", "busybox")
	for _, d := range []string{"/sbin", "/usr/bin", "/usr/sbin", "/proc", "/sys", "/dev", "/tmp", "/out"} {
		root.Dir(d, 0o755)
	}
	root.Bytes("/etc/hosts", []byte("127.0.0.1 localhost\n::1 localhost\n"), 0o644)
	root.Bytes("/init", []byte(strings.ReplaceAll(initScript, "@RESULTS@", m.results)), 0o755)
	root.Bytes("/run/vm/script", []byte(g.Script), 0o755)
	if g.Files != nil {
		for _, e := range g.Files.entries {
			root.add(e)
		}
	}
	initrd := filepath.Join(dir, "initramfs.cpio")
	if err := root.WriteFile(initrd); err != nil {
		return nil, err
	}
	// The archive is as large as the files in it, models included: not worth keeping.
	defer os.Remove(initrd)

	console, results := filepath.Join(dir, "console.log"), filepath.Join(dir, "results.txt")
	// One TCG thread: with one per vCPU, x86-64's 6.12 panicked once sched_switch was traced.
	args := append([]string{"-accel", "tcg,thread=single"}, m.args...)
	args = append(args, "-smp", strconv.Itoa(cmp.Or(g.CPUs, 2)), "-m", cmp.Or(g.Memory, "3G"),
		"-kernel", cmp.Or(g.Kernel.Vmlinux, g.Kernel.Vmlinuz), "-initrd", initrd,
		"-append", strings.TrimSpace("console="+m.console+" panic=-1 "+g.Cmdline),
		"-nographic", "-no-reboot", "-monitor", "none", "-nic", "none",
		"-serial", "file:"+console)
	if m.results == m.console {
		results = console
	} else {
		args = append(args, "-serial", "file:"+results)
	}
	cmd := exec.CommandContext(ctx, m.qemu, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	runErr := cmd.Run()
	r := &Result{Wall: time.Since(start), Out: filepath.Join(dir, "out"), Status: -1}
	log, _ := os.ReadFile(console)
	r.Console = string(log)
	if at := strings.Index(r.Console, beginMarker); at >= 0 && results == console {
		r.Console = r.Console[:at]
	}
	if runErr != nil {
		return r, fmt.Errorf("%s: %w (%s)\n%s", m.qemu, cmp.Or(ctx.Err(), runErr), strings.TrimSpace(stderr.String()), tail(r.Console))
	}
	if err := r.unpack(results); err != nil {
		return r, fmt.Errorf("%s: no results from the guest: %w\n%s", g.Kernel.Release, err, tail(r.Console))
	}
	return r, nil
}

// tail is the end of a console log, enough to show a panic's cause.
func tail(s string) string {
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// unpack decodes the results the guest wrote to ttyS1: the base64 of a gzipped tar of
// /out and /run/vm, between the marker lines.
func (r *Result) unpack(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var b64 bytes.Buffer
	sc := bufio.NewScanner(f)
	state := 0 // 0: before the begin marker, 1: inside, 2: after the end marker
	for sc.Scan() && state < 2 {
		switch line := strings.TrimSpace(sc.Text()); {
		case line == beginMarker:
			state = 1
		case line == endMarker && state == 1:
			state = 2
		case state == 1:
			b64.WriteString(line)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if state != 2 {
		return errors.New("the markers are missing")
	}
	gz, err := gzip.NewReader(base64.NewDecoder(base64.StdEncoding, &b64))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.Out, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		switch {
		case name == "run/vm/output":
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			r.Output = string(b)
		case name == "run/vm/status" || name == "run/vm/uptime":
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			v := strings.TrimSpace(string(b))
			if name == "run/vm/status" {
				r.Status, err = strconv.Atoi(v)
			} else {
				r.InitAt, err = time.ParseDuration(v + "s")
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case strings.HasPrefix(name, "out/") && filepath.IsLocal(name):
			if err := extract(filepath.Join(r.Out, strings.TrimPrefix(name, "out/")), h, tr); err != nil {
				return err
			}
		}
	}
}

// extract writes one tar entry of /out at path.
func extract(path string, h *tar.Header, r io.Reader) error {
	switch h.Typeflag {
	case tar.TypeDir:
		return os.MkdirAll(path, 0o755)
	case tar.TypeSymlink:
		return os.Symlink(h.Linkname, path)
	case tar.TypeReg:
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, h.FileInfo().Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, r); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}
