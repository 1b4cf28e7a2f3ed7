package wxcrypto

import (
	"errors"
	"testing"
)

// TestDuplicateElementRefused: a callback that names a field twice is
// refused, not read last-wins: the part a signature or a check saw need
// not be the part that is used.
func TestDuplicateElementRefused(t *testing.T) {
	for _, raw := range []string{
		`<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><Content>one</Content><Content>two</Content></xml>`,
		`<xml><FromUserName>a</FromUserName><FromUserName>b</FromUserName><MsgType>text</MsgType></xml>`,
	} {
		if _, err := ParseMessage([]byte(raw)); !errors.Is(err, ErrRefused) {
			t.Errorf("ParseMessage(%s) = %v; want a refusal", raw, err)
		}
	}
	if _, err := ParseEnvelope([]byte(`<xml><Encrypt>a</Encrypt><Encrypt>b</Encrypt></xml>`)); !errors.Is(err, ErrRefused) {
		t.Errorf("ParseEnvelope with two Encrypt = %v; want a refusal", err)
	}
}

// TestSecondDocumentRefused: anything but whitespace and comments after
// </xml> is refused, not ignored.
func TestSecondDocumentRefused(t *testing.T) {
	const one = `<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><Content>hi</Content></xml>`
	for _, tail := range []string{
		`<xml><FromUserName>b</FromUserName><MsgType>text</MsgType></xml>`,
		`trailing text`,
		`<other/>`,
	} {
		if _, err := ParseMessage([]byte(one + tail)); !errors.Is(err, ErrRefused) {
			t.Errorf("ParseMessage(… %s) = %v; want a refusal", tail, err)
		}
	}
	for _, tail := range []string{"", "\n", "  \r\n", "<!-- a comment -->\n"} {
		if m, err := ParseMessage([]byte(one + tail)); err != nil || m.Content != "hi" {
			t.Errorf("ParseMessage(… %q) = %+v, %v; want it read", tail, m, err)
		}
	}
}
