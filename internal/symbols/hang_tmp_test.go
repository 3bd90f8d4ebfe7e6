package symbols

import (
	"bytes"
	"math/rand"
	"testing"
	"time"
	"fmt"
	"os"
)

func TestHangTmp(t *testing.T) {
	base := buildELF(testFuncs(), false)
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		b := append([]byte(nil), base...)
		for k := 0; k < 1+r.Intn(4); k++ {
			b[r.Intn(len(b))] = byte(r.Intn(256))
		}
		if r.Intn(4) == 0 { b = b[:r.Intn(len(b))] }
		done := make(chan struct{})
		go func() {
			defer close(done)
			file, err := NewFile(bytes.NewReader(b), "fuzz")
			if err != nil { return }
			for _, sym := range file.syms { file.ProbeOffset(sym, RDI); file.RIPTarget(sym); file.ImmediateReturn(sym); file.CString(sym.Value) }
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			os.WriteFile("/tmp/hang.bin", b, 0o644)
			panic(fmt.Sprintf("hang at %d", i))
		}
	}
}
