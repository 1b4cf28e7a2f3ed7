package feishu

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// cardThenDie shows text in a new live card to m and returns its
// reference, never finishing it: its process died.
func cardThenDie(t *testing.T, f *fixture, m channels.Message, text string) string {
	t.Helper()
	sink, err := f.ch.StartReply(context.Background(), m)
	if err != nil || sink == nil {
		t.Fatalf("StartReply = %v, %v", sink, err)
	}
	for _, w := range strings.SplitAfter(text, " ") {
		if _, err := sink.Show(context.Background(), channels.Progress{Kind: channels.ProgressText, Text: w}); err != nil {
			t.Fatal(err)
		}
	}
	ref := sink.(channels.Referenced).Reference()
	if ref == "" {
		t.Fatal("a card that shows text names nothing")
	}
	return ref
}

// TestAnAdoptedCardIsFinishedInPlace: a card shown in part by a process
// that died — a CardKit card left streaming, at a sequence the adopter
// does not know, or a patched card — is completed by another with the
// whole answer: one card, the answer, streaming closed.
func TestAnAdoptedCardIsFinishedInPlace(t *testing.T) {
	t.Parallel()
	for _, cardkit := range []bool{true, false} {
		f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
		f.api.RefuseCardKit(!cardkit)
		m := groupMsg()
		ref := cardThenDie(t, f, m, "Roll back the deploy first, then")
		sink, err := f.ch.AdoptReply(context.Background(), m, ref)
		if err != nil {
			t.Fatalf("cardkit %v: AdoptReply(%s) = %v", cardkit, ref, err)
		}
		if err := sink.Finish(context.Background(), channels.Reply{Text: liveAnswer}); err != nil {
			t.Fatalf("cardkit %v: Finish of the adopted card = %v; want it completed", cardkit, err)
		}
		v := onlyVisible(t, f.api, liveAnswer)
		if cardkit == (v.CardID == "") || v.Streaming {
			t.Errorf("cardkit %v: visible %+v; want the card completed, streaming closed", cardkit, v)
		}
	}
}

// TestAnAdoptedCardThatCannotBeUpdatedIsRecalled: where Feishu refuses
// the update, the half answer is recalled and Finish fails, so that the
// answer is posted once instead.
func TestAnAdoptedCardThatCannotBeUpdatedIsRecalled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
	m := groupMsg()
	ref := cardThenDie(t, f, m, "Roll back")
	var fails []feishutest.Failure
	for range 10 {
		fails = append(fails, feishutest.Failure{Status: 400, Code: 300309, Msg: "streaming mode is closed"})
	}
	f.api.Fail(feishutest.OpCardContent, fails...)
	sink, err := f.ch.AdoptReply(context.Background(), m, ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Finish(context.Background(), channels.Reply{Text: liveAnswer}); err == nil {
		t.Fatal("Finish reported a card it could not update as completed")
	}
	if vis := f.api.Visible(); len(vis) != 0 {
		t.Fatalf("visible %+v; want the half answer recalled", vis)
	}
}

// TestAdoptReplyRefusesForeignCards: a reference is read back from Redis;
// one this adapter cannot have made for this chat is refused before any
// call to Feishu.
func TestAdoptReplyRefusesForeignCards(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	m := groupMsg()
	cases := map[string]string{
		"not JSON":         "om_1",
		"another chat":     `{"chat":"oc_other","mode":"patch","msg":"om_1"}`,
		"no message":       `{"chat":"` + m.Chat + `","mode":"patch"}`,
		"a path in the id": `{"chat":"` + m.Chat + `","mode":"patch","msg":"../../chats/oc_x"}`,
		"no card":          `{"chat":"` + m.Chat + `","mode":"cardkit","msg":"om_1","at":1}`,
		"no time":          `{"chat":"` + m.Chat + `","mode":"cardkit","msg":"om_1","card":"card_1"}`,
		"an unknown mode":  `{"chat":"` + m.Chat + `","mode":"post","msg":"om_1"}`,
		"oversized":        `{"chat":"` + m.Chat + `","mode":"patch","msg":"om_1","x":"` + strings.Repeat("x", 2000) + `"}`,
		"empty":            "",
	}
	before := len(f.api.Calls())
	for name, ref := range cases {
		if sink, err := f.ch.AdoptReply(context.Background(), m, ref); err == nil {
			t.Errorf("%s: AdoptReply = %v; want it refused", name, sink)
		}
	}
	if calls := f.api.Calls()[before:]; len(calls) != 0 {
		t.Errorf("refused references made calls %+v", calls)
	}
}

// TestIsIDIsThePattern holds isID to the pattern it replaced,
// ^[A-Za-z0-9_-]{1,128}$, at every edge.
func TestIsIDIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	for _, id := range []string{
		"", "a", "om_dc13264520392913993dd051dba21dcf", "-", "_", "a.b", "a b", "a/b", "é", "a\n",
		strings.Repeat("a", 128), strings.Repeat("a", 129),
	} {
		if got, want := isID(id), pattern.MatchString(id); got != want {
			t.Errorf("isID(%q) = %v, want %v", id, got, want)
		}
	}
}
