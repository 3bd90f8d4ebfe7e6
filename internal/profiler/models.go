package profiler

import (
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/registry"
	"github.com/profinfer/profinfer/internal/runtimes"
)

// What a traced process runs is read by the controller from /proc, and handed to the
// reader for its spans: its model file, and whisper's context. A llama_context's size,
// threads and batch sizes are read by the reader from what each decode sends.

// modelSearch is how often the processes without a model file are looked at again.
const modelSearch = time.Second

// searchModels looks for the model file of each traced process that has none yet, every
// modelSearch while some has none, and returns when to look next (zero: none is missing).
// A server loads its model some time after it starts, and after profinfer attached. A
// process is looked at again only once its mappings grew (an RPC server never loads a
// model).
func (p *Profiler) searchModels() time.Time {
	c := p.ctl
	missing := false
	for _, t := range c.procs {
		missing = missing || !t.model && !t.noModel
	}
	now := time.Now()
	switch { // a model found just now by readContext makes one look in vain
	case !missing:
		c.search = time.Time{}
	case c.search.IsZero():
		c.search = now.Add(modelSearch)
	case !now.Before(c.search):
		p.findModels()
		c.search = now.Add(modelSearch)
	}
	return c.search
}

func (p *Profiler) findModels() {
	defer p.busy()()
	for _, t := range p.ctl.procs {
		if t.model || t.noModel {
			continue
		}
		if m, changed := p.reg.LookForModel(t.pid, t.modelVSize, runtimes.ModelArg(t.args)); changed {
			p.setModel(t, m)
		}
	}
}

// setModel records what a look for t's model found, and hands the reader a model found.
func (p *Profiler) setModel(t *ctlProc, m registry.ModelLook) {
	pid := t.pid
	switch {
	case !m.Found:
		t.modelVSize = m.VSize
	case m.Err != nil:
		t.noModel = true // unreadable: say so once, and go on without
		p.log.Warn("model file not described", zap.Int("pid", pid), zap.Error(m.Err))
	default:
		t.model = true
		info := m.Info
		info.Name = t.runtime.ModelName(filepath.Join("/proc", strconv.Itoa(pid), "root", m.Path), m.Path, info.Name)
		p.do(func(in *ingest) {
			if tr := in.procs[pid]; tr != nil {
				tr.proc.Model = &info
			}
		})
		p.log.Info("model", zap.Int("pid", pid), zap.String("path", m.Path), zap.String("architecture", m.Info.Architecture),
			zap.Uint64("parameters", m.Info.Parameters), zap.String("file_type", m.Info.FileType))
	}
}

// readContext reads whisper_context ctx that process pid decodes with, where it is one,
// and looks for the process's model if it has none, then has the reader export the
// decodes that waited for it. (A llama_context's settings come with each decode.)
func (p *Profiler) readContext(pid int, ctx uint64) {
	t := p.ctl.procs[pid]
	if t == nil {
		return
	}
	defer p.busy()()
	var wm *model.Whisper
	if t.whisper != nil {
		if m, err := p.reg.ReadWhisper(pid, t.whisper, ctx); err != nil {
			p.log.Debug("whisper_context not read", zap.Int("pid", pid), zap.Error(err))
		} else {
			wm = &m
			p.log.Info("whisper model", zap.Int("pid", pid), zap.String("type", wm.Type), zap.Int("audio_layers", wm.AudioLayers),
				zap.Int("audio_state", wm.AudioState), zap.Int("text_layers", wm.TextLayers), zap.Int("text_state", wm.TextState),
				zap.String("file_type", wm.FileType))
		}
	}
	if !t.model && !t.noModel {
		if m, changed := p.reg.LookForModel(pid, t.modelVSize, runtimes.ModelArg(t.args)); changed {
			p.setModel(t, m)
		}
	}
	p.do(func(in *ingest) {
		tr := in.procs[pid]
		if tr == nil {
			return
		}
		if wm != nil {
			tr.proc.Whisper = wm
		}
		if tr.ctx == ctx { // else a newer context's lookup is on its way
			tr.looking = false
			in.release(tr)
		}
	})
}
