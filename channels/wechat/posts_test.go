package wechat

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// TestPostsCountsWhatSendSends: the reply caps count a WeChat answer in
// the messages it is sent as — chunk_chars characters over iLink, one
// streamed answer then 4,000-byte pushes over WeCom.
func TestPostsCountsWhatSendSends(t *testing.T) {
	t.Parallel()
	a := &Adapter{cfg: Config{ChunkChars: 600}}
	text := strings.Repeat("word ", 2000) // 10,000 characters
	ilink := channels.Message{Meta: map[string]string{"via": ViaILink}}
	if got, want := a.Posts(ilink, text), len(splitChars(channels.PlainText(text), 600)); got != want || got < 16 {
		t.Errorf("iLink: %d posts, want %d (about 17)", got, want)
	}
	wecom := channels.Message{Meta: map[string]string{"via": ViaWeCom}}
	if got := a.Posts(wecom, text); got != 1 {
		t.Errorf("WeCom: %d posts for 10,000 characters, want the one streamed answer", got)
	}
	if got := a.Posts(wecom, strings.Repeat("word ", 6000)); got != 4 { // 20,000 streamed, 10,000 pushed as 3
		t.Errorf("WeCom: %d posts for 30,000 characters, want 4", got)
	}
	var _ channels.PostCounter = a
}
