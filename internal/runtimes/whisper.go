package runtimes

import (
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/profinfer/profinfer/internal/assemble"
	"github.com/profinfer/profinfer/internal/model"
	"github.com/profinfer/profinfer/internal/schema"
	"github.com/profinfer/profinfer/internal/symbols"
)

// whisper.cpp computes four graphs, each with a scheduler of its own: the convolution
// over the mel spectrogram, the encoder, the cross-attention's keys and values (the three
// make whisper's encode), and the decoder, once per decoding pass. Its weights are not
// named (ggml names them leaf_N as it builds a graph), so each graph is told by the node
// it begins with: the convolution's IM2COL of the spectrogram; the encoder's view of the
// positional embedding or of the convolution's output (embd_conv), added to each other;
// the cross-attention's MUL_MAT of a key weight by the encoder's output; the decoder's
// GET_ROWS of the tokens' embeddings. Voice activity detection begins with a padding.
func whisperStage(h *assemble.Head, tokens int) Stage {
	encode := func(graph string) Stage { return Stage{Span: schema.SpanWhisperEncode, Phase: "encode", Graph: graph} }
	f := h.First
	switch {
	case f == nil:
	case f.Op == "IM2COL":
		return encode("conv")
	case f.Op == "VIEW" || f.Op == "CONT" || f.Op == "TRANSPOSE" || strings.HasPrefix(f.Name, "embd_conv"):
		return encode("encoder")
	case f.Op == "MUL_MAT":
		return encode("cross")
	case f.Op == "GET_ROWS" && tokens > 0:
		return Stage{Span: schema.SpanWhisperDecode, Phase: "decode", Graph: "decoder"}
	}
	return Stage{Span: schedSpan, Phase: computePhase}
}

// WhisperFields says where a whisper.cpp build keeps its model's hyperparameters in
// struct whisper_context: C++, changing between releases, so the offsets come from the
// build's own getters (whisper_model_n_vocab and its like), one load each.
type WhisperFields struct {
	off [len(whisperGetters)]uint64
}

// whisperGetters are the getters read, in the order of model.Whisper's fields.
var whisperGetters = [...]string{"whisper_model_type", "whisper_model_n_vocab", "whisper_model_n_audio_ctx",
	"whisper_model_n_audio_state", "whisper_model_n_audio_head", "whisper_model_n_audio_layer",
	"whisper_model_n_text_ctx", "whisper_model_n_text_state", "whisper_model_n_text_head",
	"whisper_model_n_text_layer", "whisper_model_n_mels", "whisper_model_ftype"}

// WhisperFieldsIn reads the offsets from the getters of f, the object that defines
// whisper_full_with_state.
func WhisperFieldsIn(f *symbols.File) (*WhisperFields, error) {
	var w WhisperFields
	for i, name := range whisperGetters {
		sym, ok := f.Function(name)
		if !ok {
			return nil, fmt.Errorf("runtimes: %s lacks whisper's getter %s", f.Path(), name)
		}
		off, err := f.FieldReturn(sym)
		if err != nil {
			return nil, err
		}
		w.off[i] = off
	}
	return &w, nil
}

// whisperTypes are whisper.cpp's names of its enum e_model, which its loader guesses from
// the encoder's layers.
var whisperTypes = [...]string{"unknown", "tiny", "base", "small", "medium", "large"}

// Read returns the model of the whisper_context at ctx in a process whose memory is mem.
// Values no loaded model has are an error: the context may have been freed since.
func (w *WhisperFields) Read(mem io.ReaderAt, ctx uint64) (model.Whisper, error) {
	var v [len(whisperGetters)]int
	var b [4]byte
	for i, off := range w.off {
		if _, err := mem.ReadAt(b[:], int64(ctx+off)); err != nil {
			return model.Whisper{}, fmt.Errorf("runtimes: reading whisper_context at %#x: %w", ctx, err)
		}
		v[i] = int(int32(binary.LittleEndian.Uint32(b[:])))
	}
	m := model.Whisper{Vocab: v[1], AudioCtx: v[2], AudioState: v[3], AudioHeads: v[4], AudioLayers: v[5],
		TextCtx: v[6], TextState: v[7], TextHeads: v[8], TextLayers: v[9], Mels: v[10], FileType: model.FileType(uint64(max(v[11], 0)))}
	if v[0] < 0 || v[0] >= len(whisperTypes) || m.Vocab <= 0 || m.AudioLayers <= 0 || m.TextLayers <= 0 || m.AudioState <= 0 ||
		m.TextState <= 0 || m.Mels <= 0 || m.AudioLayers > 1024 || m.TextLayers > 1024 {
		return model.Whisper{}, fmt.Errorf("runtimes: whisper_context at %#x reads type %d, %d audio layers, %d text layers: freed since",
			ctx, v[0], m.AudioLayers, m.TextLayers)
	}
	m.Type = whisperTypes[v[0]]
	return m, nil
}
