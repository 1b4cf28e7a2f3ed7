package jsonstring

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppend: every string is written as encoding/json writes it.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/\b\f\n\r\t", "<>&", "\u2028\u2029", "\xff\xfe", "这是🙂", "\x00\x1f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := Append(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q) = %s; encoding/json writes %s", s, got, want)
		}
	})
}
