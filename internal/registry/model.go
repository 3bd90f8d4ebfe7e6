package registry

import (
	"os"

	"github.com/profinfer/profinfer/internal/discover"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/runtimes"
)

// ModelLook is what a look for a process's model file found.
type ModelLook struct {
	VSize uint64 // the process's virtual size when it was looked at
	Found bool
	Path  string
	Info  model.Info
	Err   error // the file was found but not read
}

// LookForModel looks for the model file of process pid, unless its virtual size is still
// vsize, which it had when none was found (changed false): a server loads its model some
// time after it starts, and an RPC server never does. A file the process maps or holds
// open is its model; else the one it named on its command line (named, relative to its
// working directory): read without mmap, a loaded model is neither.
func (r *Registry) LookForModel(pid int, vsize uint64, named string) (m ModelLook, changed bool) {
	v, err := discover.VSize(r.fs, pid)
	if err != nil || v == vsize {
		return m, false
	}
	m.VSize = v
	var host string
	m.Path, host, m.Found = model.Find(r.fs, r.cfg.Root, pid)
	if !m.Found && named != "" {
		m.Path, host, m.Found = model.Named(r.cfg.Root, pid, named)
	}
	if m.Found {
		m.Info, m.Err = r.models.Read(host, m.Path)
	}
	return m, true
}

// ReadWhisper reads the model of whisper_context ctx of process pid, from where fields
// says its hyperparameters are.
func (r *Registry) ReadWhisper(pid int, fields *runtimes.WhisperFields, ctx uint64) (model.Whisper, error) {
	mem, err := os.Open(r.proc(pid, "mem"))
	if err != nil {
		return model.Whisper{}, err
	}
	defer mem.Close()
	return fields.Read(mem, ctx)
}
