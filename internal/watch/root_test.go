package watch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWithin resolves links inside a root as its processes see them: an absolute link
// (Debian's /lib64/ld-linux-x86-64.so.2) leads into the root, not out of it.
func TestWithin(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/lib64", "usr/lib/x86_64-linux-gnu"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ld := filepath.Join(root, "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	if err := os.WriteFile(ld, []byte("loader"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"lib":                            "usr/lib",
		"lib64":                          "usr/lib64",
		"usr/lib64/ld-linux-x86-64.so.2": "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"usr/lib64/up":                   "../../../../../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"usr/lib64/loop":                 "/lib64/loop",
		"usr/lib64/gone":                 "/nowhere/ld.so",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"/lib64/ld-linux-x86-64.so.2": ld, // relative, then absolute
		"/lib64/up":                   ld, // .. stops at the root
		"/lib/x86_64-linux-gnu/./ld-linux-x86-64.so.2": ld,
	} {
		got, err := within(root, name)
		if err != nil || got != want {
			t.Errorf("within(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"/lib64/loop", "/lib64/gone", "/lib64/absent"} {
		if got, err := within(root, name); err == nil {
			t.Errorf("within(%s) = %q, want an error", name, got)
		}
	}
}

// TestInterpreter reads a dynamic executable's loader, and none of a static one.
func TestInterpreter(t *testing.T) {
	sh, err := interpreter("/bin/sh")
	if err != nil || !slices.Contains(Loaders, sh) {
		t.Errorf("/bin/sh's interpreter: %q, %v; want one of %v", sh, err, Loaders)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := interpreter(notELF); err == nil {
		t.Errorf("a script's interpreter: %q, want an error", got)
	}
}
