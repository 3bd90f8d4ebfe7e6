package testbench

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// WhisperShape is the hyperparameters of a synthetic whisper model, as the header of
// whisper.cpp's legacy ggml model file states them.
type WhisperShape struct {
	Name       string
	Vocab      int // 51865 or more: multilingual; 51864: English-only
	AudioCtx   int
	AudioState int // equal to TextState: whisper.cpp assumes it
	AudioHeads int
	AudioLayer int
	TextCtx    int
	TextState  int
	TextHeads  int
	TextLayer  int
	Mels       int
}

// WhisperShapes are the whisper models the test bench writes, by name.
var WhisperShapes = map[string]WhisperShape{
	// OpenAI's whisper tiny (multilingual): 39M parameters, 75 MB in F16.
	"whisper-tiny": {Name: "whisper-tiny", Vocab: 51865, AudioCtx: 1500, AudioState: 384, AudioHeads: 6, AudioLayer: 4,
		TextCtx: 448, TextState: 384, TextHeads: 6, TextLayer: 4, Mels: 80},
	// The same graph, narrower and one layer deep, for quick runs: 6 MB.
	"whisper-micro": {Name: "whisper-micro", Vocab: 51865, AudioCtx: 1500, AudioState: 64, AudioHeads: 2, AudioLayer: 1,
		TextCtx: 448, TextState: 64, TextHeads: 2, TextLayer: 1, Mels: 80},
}

// The legacy ggml file format's magic ("ggml" as a little-endian uint32) and tensor types.
const (
	whisperMagic = 0x67676d6c
	ggmlF32      = 0
	ggmlF16      = 1
)

// whisperTensor is one tensor of a whisper model file: its name, type, shape (ggml order,
// innermost first) and how its values are made.
type whisperTensor struct {
	Name string
	Type int32
	Ne   []int32
	Fill fill
}

type fill int

const (
	fillRandom fill = iota // weights and biases: small random values
	fillOnes               // layer-norm scales
	fillZeros              // layer-norm shifts
)

func (t whisperTensor) elements() uint64 {
	n := uint64(1)
	for _, d := range t.Ne {
		n *= uint64(d)
	}
	return n
}

// WriteWhisperModel writes s as a whisper.cpp legacy ggml (.bin) model with F16 matrices
// and random weights, in the layout whisper.cpp's whisper_model_load reads: magic,
// hyperparameters, mel filters, vocabulary, then tensors. The file's vocabulary holds
// only the text tokens; the loader names the special ones (end of text, start of
// transcript, languages, tasks, timestamps) itself, up to s.Vocab.
func WriteWhisperModel(path string, s WhisperShape, seed uint64) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	err = s.write(w, seed)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s WhisperShape) write(w io.Writer, seed uint64) error {
	if s.AudioState != s.TextState {
		return fmt.Errorf("whisper shape %s: audio state %d != text state %d", s.Name, s.AudioState, s.TextState)
	}
	put := func(vs ...any) error {
		for _, v := range vs {
			if err := binary.Write(w, binary.LittleEndian, v); err != nil {
				return err
			}
		}
		return nil
	}
	const ftypeF16 = 1
	if err := put(uint32(whisperMagic), int32(s.Vocab), int32(s.AudioCtx), int32(s.AudioState), int32(s.AudioHeads),
		int32(s.AudioLayer), int32(s.TextCtx), int32(s.TextState), int32(s.TextHeads), int32(s.TextLayer),
		int32(s.Mels), int32(ftypeF16)); err != nil {
		return err
	}
	const nFFT = 201 // 1 + WHISPER_N_FFT/2: the bins from 0 to Nyquist, as whisper.cpp checks
	if err := put(int32(s.Mels), int32(nFFT), melFilters(s.Mels, nFFT, 16000)); err != nil {
		return err
	}
	tokens := whisperTokens(s.Vocab)
	if err := put(int32(len(tokens))); err != nil {
		return err
	}
	for _, t := range tokens {
		if err := put(uint32(len(t))); err != nil {
			return err
		}
		if _, err := io.WriteString(w, t); err != nil {
			return err
		}
	}
	rng := newWeights(seed)
	for _, t := range s.tensors() {
		if err := put(int32(len(t.Ne)), int32(len(t.Name)), t.Type, t.Ne); err != nil {
			return err
		}
		if _, err := io.WriteString(w, t.Name); err != nil {
			return err
		}
		var err error
		switch {
		case t.Fill == fillOnes:
			err = writeOnes(w, t.elements())
		case t.Fill == fillZeros:
			_, err = w.Write(make([]byte, 4*t.elements()))
		case t.Type == ggmlF16:
			err = rng.writeF16(w, t.elements())
		default:
			err = rng.writeF32(w, t.elements())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// tensors lists every tensor whisper_model_load requires, with the names, types and
// shapes it checks: matrices and convolution kernels F16 (ftype 1), everything else F32.
func (s WhisperShape) tensors() []whisperTensor {
	var ts []whisperTensor
	add := func(name string, typ int32, f fill, ne ...int) {
		t := whisperTensor{Name: name, Type: typ, Fill: f}
		for _, d := range ne {
			t.Ne = append(t.Ne, int32(d))
		}
		ts = append(ts, t)
	}
	attention := func(prefix string, n int) {
		add(prefix+".query.weight", ggmlF16, fillRandom, n, n)
		add(prefix+".query.bias", ggmlF32, fillRandom, n)
		add(prefix+".key.weight", ggmlF16, fillRandom, n, n) // no key bias in whisper
		add(prefix+".value.weight", ggmlF16, fillRandom, n, n)
		add(prefix+".value.bias", ggmlF32, fillRandom, n)
		add(prefix+".out.weight", ggmlF16, fillRandom, n, n)
		add(prefix+".out.bias", ggmlF32, fillRandom, n)
	}
	norm := func(prefix string, n int) {
		add(prefix+".weight", ggmlF32, fillOnes, n)
		add(prefix+".bias", ggmlF32, fillZeros, n)
	}
	mlp := func(prefix string, n int) {
		add(prefix+".mlp.0.weight", ggmlF16, fillRandom, n, 4*n)
		add(prefix+".mlp.0.bias", ggmlF32, fillRandom, 4*n)
		add(prefix+".mlp.2.weight", ggmlF16, fillRandom, 4*n, n)
		add(prefix+".mlp.2.bias", ggmlF32, fillRandom, n)
		norm(prefix+".mlp_ln", n)
	}

	a := s.AudioState
	add("encoder.positional_embedding", ggmlF32, fillRandom, a, s.AudioCtx)
	add("encoder.conv1.weight", ggmlF16, fillRandom, 3, s.Mels, a)
	add("encoder.conv1.bias", ggmlF32, fillRandom, 1, a)
	add("encoder.conv2.weight", ggmlF16, fillRandom, 3, a, a)
	add("encoder.conv2.bias", ggmlF32, fillRandom, 1, a)
	for i := 0; i < s.AudioLayer; i++ {
		b := fmt.Sprintf("encoder.blocks.%d", i)
		attention(b+".attn", a)
		norm(b+".attn_ln", a)
		mlp(b, a)
	}
	norm("encoder.ln_post", a)

	t := s.TextState
	add("decoder.positional_embedding", ggmlF32, fillRandom, t, s.TextCtx)
	add("decoder.token_embedding.weight", ggmlF16, fillRandom, t, s.Vocab)
	for i := 0; i < s.TextLayer; i++ {
		b := fmt.Sprintf("decoder.blocks.%d", i)
		attention(b+".attn", t)
		norm(b+".attn_ln", t)
		attention(b+".cross_attn", t)
		norm(b+".cross_attn_ln", t)
		mlp(b, t)
	}
	norm("decoder.ln", t)
	return ts
}

// whisperTokens returns the text tokens of a synthetic vocabulary for a model of n tokens
// in all: the ids below whisper.cpp's end-of-text token (50256 English-only, 50257
// multilingual). As in GPT-2's byte-level BPE, the first 256 are the single bytes in
// GPT-2's order (printable ones first, so " " is id 220; whisper.cpp's blank suppression
// looks " " up and throws without it), then filler words (" a", " b", …, "aa", …) so
// that whatever the decoder samples prints as text. whisper.cpp names the ids from
// there to n itself.
func whisperTokens(n int) []string {
	text := 50256
	if n >= 51865 {
		text = 50257
	}
	text = min(text, n)
	tokens := make([]string, 0, text)
	seen := map[string]bool{}
	add := func(t string) {
		if len(tokens) < text && !seen[t] {
			seen[t] = true
			tokens = append(tokens, t)
		}
	}
	printable := func(b int) bool { return '!' <= b && b <= '~' || 0xa1 <= b && b <= 0xac || 0xae <= b && b <= 0xff }
	for b := 0; b < 256; b++ {
		if printable(b) {
			add(string([]byte{byte(b)}))
		}
	}
	for b := 0; b < 256; b++ {
		if !printable(b) {
			add(string([]byte{byte(b)}))
		}
	}
	for l := 1; len(tokens) < text; l++ {
		for _, w := range words(l) {
			add(" " + w)
			add(w)
		}
	}
	return tokens
}

// melFilters returns n triangular mel filters over bins FFT bins (0 to Nyquist) at rate
// Hz, Slaney-scaled and area-normalised like librosa.filters.mel, which made the filters
// in OpenAI's whisper; row-major, one row per filter.
func melFilters(n, bins int, rate float64) []float32 {
	const (
		fSp     = 200.0 / 3
		minLog  = 1000.0
		minMel  = minLog / fSp
		logStep = 0.06875177742094912 // log(6.4) / 27
	)
	toMel := func(hz float64) float64 {
		if hz < minLog {
			return hz / fSp
		}
		return minMel + math.Log(hz/minLog)/logStep
	}
	toHz := func(mel float64) float64 {
		if mel < minMel {
			return mel * fSp
		}
		return minLog * math.Exp(logStep*(mel-minMel))
	}
	hz := make([]float64, n+2)
	top := toMel(rate / 2)
	for i := range hz {
		hz[i] = toHz(top * float64(i) / float64(n+1))
	}
	out := make([]float32, n*bins)
	for m := 0; m < n; m++ {
		norm := 2 / (hz[m+2] - hz[m])
		for k := 0; k < bins; k++ {
			f := rate / 2 * float64(k) / float64(bins-1)
			lower := (f - hz[m]) / (hz[m+1] - hz[m])
			upper := (hz[m+2] - f) / (hz[m+2] - hz[m+1])
			if v := math.Min(lower, upper); v > 0 {
				out[m*bins+k] = float32(v * norm)
			}
		}
	}
	return out
}

// writeF32 writes n uniform random F32 values in ±0.035.
func (w *weights) writeF32(out io.Writer, n uint64) error {
	for n > 0 {
		chunk := min(n, uint64(len(w.buf)/4))
		b := w.buf[:4*chunk]
		for i := 0; i < len(b); i += 4 {
			v := (float32(w.next()>>40)/float32(1<<24)*2 - 1) * 0.035
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
		}
		if _, err := out.Write(b); err != nil {
			return err
		}
		n -= chunk
	}
	return nil
}

// WriteWAV writes seconds of 16 kHz mono 16-bit PCM audio to path: a few steady and
// gliding tones under an on-off envelope, with noise from seed.
func WriteWAV(path string, seconds float64, seed uint64) error {
	const rate = 16000
	n := int(seconds * rate)
	data := make([]byte, 44+2*n)
	le := binary.LittleEndian
	copy(data[0:], "RIFF")
	le.PutUint32(data[4:], uint32(36+2*n))
	copy(data[8:], "WAVEfmt ")
	le.PutUint32(data[16:], 16) // fmt chunk size
	le.PutUint16(data[20:], 1)  // PCM
	le.PutUint16(data[22:], 1)  // mono
	le.PutUint32(data[24:], rate)
	le.PutUint32(data[28:], rate*2) // bytes per second
	le.PutUint16(data[32:], 2)      // block align
	le.PutUint16(data[34:], 16)     // bits per sample
	copy(data[36:], "data")
	le.PutUint32(data[40:], uint32(2*n))
	rng := &weights{state: seed | 1}
	for i := 0; i < n; i++ {
		t := float64(i) / rate
		env := 0.5 + 0.5*math.Sin(2*math.Pi*2*t) // syllable-rate swell
		v := 0.25*math.Sin(2*math.Pi*220*t) + 0.15*math.Sin(2*math.Pi*440*t) +
			0.1*math.Sin(2*math.Pi*(700+300*math.Sin(2*math.Pi*0.5*t))*t)
		noise := float64(int64(rng.next()>>11))/float64(1<<53)*2 - 1
		s := env*v + 0.05*noise
		le.PutUint16(data[44+2*i:], uint16(int16(math.Round(math.Max(-1, math.Min(1, s))*32767))))
	}
	return os.WriteFile(path, data, 0o644)
}
