package wsproto

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"
)

// Bytes github.com/larksuite/oapi-sdk-go/v3/ws (v3.5.3) marshalled for the
// same frames: what Feishu's server reads from the SDK, byte for byte.
var sdkFrames = []struct {
	name string
	f    Frame
	hex  string
}{
	{"ping", *NewPingFrame(7), "08001000180720002a0c0a0474797065120470696e6732003a004a00"},
	{"event answer", Frame{SeqID: 300, LogID: 5, Service: 7, Method: 1,
		Headers: []Header{{"type", "event"}, {"sum", "1"}}, Payload: []byte(`{"a":1}`), LogIDNew: "x"},
		"08ac021005180720012a0d0a047479706512056576656e742a080a0373756d12013132003a0042077b2261223a317d4a0178"},
	{"zero", Frame{}, "080010001800200032003a004a00"},
}

func TestFrameBytesAreTheSDKs(t *testing.T) {
	for _, c := range sdkFrames {
		b, err := c.f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b); got != c.hex {
			t.Errorf("%s: marshalled\n  %s\nthe SDK:\n  %s", c.name, got, c.hex)
		}
		want, _ := hex.DecodeString(c.hex)
		var back Frame
		if err := back.Unmarshal(want); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b2, _ := back.Marshal()
		if !bytes.Equal(b2, want) {
			t.Errorf("%s: decoded and re-encoded as %x", c.name, b2)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	f := Frame{SeqID: 1<<64 - 1, LogID: 1 << 40, Service: -3, Method: int32(FrameTypeData),
		Headers:         Headers{{HeaderType, "event"}, {HeaderMessageID, "m1"}, {"", ""}},
		PayloadEncoding: "gzip", PayloadType: "json", Payload: []byte{}, LogIDNew: "log"}
	b, _ := f.Marshal()
	var g Frame
	if err := g.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f, g) {
		t.Fatalf("round trip:\n  %+v\n  %+v", f, g)
	}
}

func TestFrameRefusals(t *testing.T) {
	full, _ := (&Frame{SeqID: 1, Headers: Headers{{"k", "v"}}, Payload: []byte("p")}).Marshal()
	for i := range full {
		var f Frame
		if err := f.Unmarshal(full[:i]); err == nil && i > 0 {
			// A cut between fields can still be a whole frame only once the
			// four required fields are in; then it must decode as such.
			if f.SeqID != 1 {
				t.Errorf("cut at %d decoded as %+v", i, f)
			}
		}
	}
	bad := map[string]string{
		"no method":           "0801100018 07",
		"wrong wire type":     "0a0101",
		"length past the end": "0801100018072000 2aff01",
		"header without key":  "08011000180720002a03120176",
		"field zero":          "0001",
		"end group wire type": "0c",
	}
	for name, h := range bad {
		b, err := hex.DecodeString(stripSpaces(h))
		if err != nil {
			t.Fatal(err)
		}
		var f Frame
		if err := f.Unmarshal(b); err == nil {
			t.Errorf("%s (%s): decoded as %+v", name, h, f)
		}
	}
	// Unknown fields are skipped, of every wire type.
	b, _ := hex.DecodeString("0801100218032004" + "5005" + "590102030405060708" + "620161" + "6d01020304")
	var f Frame
	if err := f.Unmarshal(b); err != nil || f.SeqID != 1 || f.LogID != 2 || f.Service != 3 || f.Method != 4 {
		t.Fatalf("with unknown fields: %+v, %v", f, err)
	}
}

func stripSpaces(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte(" "), nil))
}

func TestHeaders(t *testing.T) {
	var h Headers
	h.Add(HeaderSum, "3")
	h.Add(HeaderSeq, "x")
	h.Add(HeaderSeq, "2")
	if h.GetInt(HeaderSum) != 3 || h.GetInt(HeaderSeq) != 2 || h.GetString(HeaderSeq) != "x" || h.GetString("none") != "" || h.GetInt("none") != 0 {
		t.Fatalf("headers: %+v", h)
	}
}

// FuzzFrame: any bytes off the long connection decode or are refused,
// never panic; what decodes re-encodes to a frame that decodes the same.
func FuzzFrame(f *testing.F) {
	for _, c := range sdkFrames {
		b, _ := hex.DecodeString(c.hex)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var a Frame
		if a.Unmarshal(data) != nil {
			return
		}
		b, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var c Frame
		if err := c.Unmarshal(b); err != nil {
			t.Fatalf("re-encoded frame does not decode: %v", err)
		}
		if a.Payload == nil {
			a.Payload = c.Payload // nil and absent are the same on the wire
		}
		if !reflect.DeepEqual(a, c) {
			t.Fatalf("decode/encode/decode:\n  %+v\n  %+v", a, c)
		}
	})
}
