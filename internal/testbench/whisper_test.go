package testbench

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A written whisper model reads back as whisper.cpp's loader reads it: the header, the
// mel filters, the vocabulary, then every tensor the loader requires, each once, with
// the shape and type it checks, and nothing after.
func TestWhisperModelLayout(t *testing.T) {
	s := WhisperShape{Name: "test", Vocab: 51865, AudioCtx: 30, AudioState: 16, AudioHeads: 2, AudioLayer: 2,
		TextCtx: 12, TextState: 16, TextHeads: 2, TextLayer: 3, Mels: 80}
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := WriteWhisperModel(path, s, 1); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	read := func(v any) {
		t.Helper()
		if err := binary.Read(r, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	var magic uint32
	read(&magic)
	if magic != 0x67676d6c {
		t.Fatalf("magic %#x", magic)
	}
	var hp [11]int32
	read(&hp)
	want := [11]int32{51865, 30, 16, 2, 2, 12, 16, 2, 3, 80, 1}
	if hp != want {
		t.Fatalf("hparams %v, want %v", hp, want)
	}
	var nMel, nFFT int32
	read(&nMel)
	read(&nFFT)
	if nMel != 80 || nFFT != 201 {
		t.Fatalf("mel filters %d×%d, want 80×201", nMel, nFFT)
	}
	filters := make([]float32, nMel*nFFT)
	read(filters)
	for m := int32(0); m < nMel; m++ {
		var sum float32
		for _, v := range filters[m*nFFT : (m+1)*nFFT] {
			sum += v
		}
		if sum <= 0 {
			t.Fatalf("mel filter %d is empty", m)
		}
	}
	var nVocab int32
	read(&nVocab)
	if nVocab != 50257 { // the text tokens; the loader adds the 1608 special ones
		t.Fatalf("vocab holds %d tokens, want 50257", nVocab)
	}
	for i := int32(0); i < nVocab; i++ {
		var n uint32
		read(&n)
		if n == 0 || n > 16 {
			t.Fatalf("token %d has length %d", i, n)
		}
		tok := make([]byte, n)
		read(tok)
		if i == 220 && string(tok) != " " { // whisper.cpp's blank suppression needs " "
			t.Fatalf("token 220 is %q, want \" \"", tok)
		}
	}

	seen := map[string]bool{}
	for {
		var h [3]int32 // n_dims, name length, type
		if err := binary.Read(r, binary.LittleEndian, &h); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if h[0] < 1 || h[0] > 3 || h[2] != 0 && h[2] != 1 {
			t.Fatalf("tensor header %v", h)
		}
		ne := make([]int32, h[0])
		read(ne)
		name := make([]byte, h[1])
		read(name)
		if seen[string(name)] {
			t.Fatalf("tensor %s written twice", name)
		}
		seen[string(name)] = true
		n := int64(1)
		for _, d := range ne {
			n *= int64(d)
		}
		size := 4 * n
		if h[2] == 1 {
			size = 2 * n
		}
		if _, err := r.Discard(int(size)); err != nil {
			t.Fatalf("tensor %s: %v", name, err)
		}
		check := func(name string, typ int32, shape ...int32) {
			t.Helper()
			if fmt.Sprint(ne) != fmt.Sprint(shape) || h[2] != typ {
				t.Errorf("%s: type %d shape %v, want %d %v", name, h[2], ne, typ, shape)
			}
		}
		switch string(name) {
		case "encoder.conv1.weight":
			check(string(name), 1, 3, 80, 16)
		case "encoder.conv2.bias":
			check(string(name), 0, 1, 16)
		case "encoder.positional_embedding":
			check(string(name), 0, 16, 30)
		case "decoder.token_embedding.weight":
			check(string(name), 1, 16, 51865)
		case "decoder.blocks.2.cross_attn.key.weight":
			check(string(name), 1, 16, 16)
		case "encoder.blocks.1.mlp.0.weight":
			check(string(name), 1, 16, 64)
		case "decoder.ln.bias":
			check(string(name), 0, 16)
		}
	}
	// The loader creates 5 encoder input tensors and 2 for its final norm, 15 per
	// encoder block, 4 decoder tensors outside blocks, 24 per decoder block.
	if wantN := 5 + 2 + 15*2 + 4 + 24*3; len(seen) != wantN {
		t.Fatalf("%d tensors, want %d", len(seen), wantN)
	}
	for _, name := range []string{"encoder.ln_post.bias", "decoder.blocks.0.cross_attn_ln.weight", "decoder.blocks.2.mlp.2.bias"} {
		if !seen[name] {
			t.Errorf("no tensor %s", name)
		}
	}
}

// The tiny shape's tensor list matches the parameter count of OpenAI's whisper tiny.
func TestWhisperTinyParameters(t *testing.T) {
	var n uint64
	for _, ts := range WhisperShapes["whisper-tiny"].tensors() {
		n += ts.elements()
	}
	// 37,760,640 values with both positional embeddings: "39M" in OpenAI's model card.
	if want := uint64(37760640); n != want {
		t.Fatalf("whisper-tiny has %d values, want %d", n, want)
	}
}

func TestWriteWAV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.wav")
	if err := WriteWAV(path, 0.5, 7); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b) != 44+16000 || string(b[:4]) != "RIFF" || string(b[8:16]) != "WAVEfmt " || string(b[36:40]) != "data" {
		t.Fatalf("bad WAV header %q (%d bytes)", b[:44], len(b))
	}
	if le.Uint32(b[24:]) != 16000 || le.Uint16(b[22:]) != 1 || le.Uint16(b[34:]) != 16 || le.Uint32(b[40:]) != 16000 {
		t.Fatalf("bad WAV format %x", b[20:44])
	}
}
