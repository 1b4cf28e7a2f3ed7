package slack

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/parleyhq/parley/channels"
)

// showThenDie shows pieces through a new live reply to m and returns its
// reference, never finishing it: its process died.
func showThenDie(t *testing.T, a *Adapter, m channels.Message, pieces ...string) string {
	t.Helper()
	sink, err := a.StartReply(context.Background(), m)
	if err != nil || sink == nil {
		t.Fatalf("StartReply = %v, %v", sink, err)
	}
	for _, p := range pieces {
		if _, err := sink.Show(context.Background(), channels.Progress{Kind: channels.ProgressText, Text: p}); err != nil {
			t.Fatal(err)
		}
	}
	ref := sink.(channels.Referenced).Reference()
	if ref == "" {
		t.Fatal("a reply that shows text names nothing")
	}
	return ref
}

// finishAdopted plays the gateway of the replica that takes over: the
// reply ref names is adopted and finished with whole, or, when it cannot
// be, whole is sent.
func finishAdopted(t *testing.T, a *Adapter, m channels.Message, ref, whole string) error {
	t.Helper()
	ctx := context.Background()
	sink, err := a.AdoptReply(ctx, m, ref)
	if err != nil {
		t.Fatalf("AdoptReply(%s) = %v", ref, err)
	}
	ferr := sink.Finish(ctx, channels.Reply{Text: whole})
	if ferr != nil {
		if err := a.Send(ctx, m, channels.Reply{Text: whole}); err != nil {
			t.Fatal(err)
		}
	}
	return ferr
}

// TestAnAdoptedLiveReplyIsFinishedInPlace: a reply shown in part by a
// process that died is finished by another with the whole answer, in the
// same message: a stream left open is stopped and edited, an edited
// message edited again. Nothing is posted beside it.
func TestAnAdoptedLiveReplyIsFinishedInPlace(t *testing.T) {
	t.Parallel()
	dm := liveMsg("T1")
	dm.Meta = map[string]string{} // top level: no stream, one edited message
	for _, c := range []struct {
		name string
		m    channels.Message
	}{{"stream", liveMsg("T1")}, {"update", dm}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := liveFixture(t)
			ref := showThenDie(t, f.a, c.m, "Roll back ", "the deploy")
			if !strings.Contains(ref, `"mode":"`+c.name+`"`) {
				t.Fatalf("reference %s; want mode %s", ref, c.name)
			}
			if err := finishAdopted(t, f.a, c.m, ref, "Roll back the deploy, then watch the errors."); err != nil {
				t.Fatalf("Finish of the adopted reply = %v; want it finished in place", err)
			}
			onlyVisible(t, f.slack, "Roll back the deploy, then watch the errors.")
			if n := f.slack.Count("chat.postMessage"); c.name == "stream" && n != 0 {
				t.Errorf("%d posts; want none", n)
			}
		})
	}
}

// TestAnAdoptedReplyTooLongToEditIsReplaced: an answer of more than one
// post cannot replace the half answer in place: the half answer is
// deleted, and the answer posted once.
func TestAnAdoptedReplyTooLongToEditIsReplaced(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	m := liveMsg("T1")
	ref := showThenDie(t, f.a, m, "A start")
	long := "A start" + strings.Repeat(" and more words", 3000)
	if err := finishAdopted(t, f.a, m, ref, long); err == nil {
		t.Fatal("Finish edited a message to an answer of several posts")
	}
	for _, v := range f.slack.Visible() {
		if v.Streamed {
			t.Fatalf("the half answer stays: %+v", v)
		}
	}
	if len(f.slack.Visible()) < 2 {
		t.Fatalf("visible %d messages; want the long answer posted", len(f.slack.Visible()))
	}
}

// TestAdoptReplyRefusesForeignReferences: a reference is read back from
// Redis; one this adapter cannot have made for this chat is refused
// before any call to Slack (no message of another chat is edited or
// deleted).
func TestAdoptReplyRefusesForeignReferences(t *testing.T) {
	t.Parallel()
	f := liveFixture(t)
	m := liveMsg("T1")
	cases := map[string]string{
		"not JSON":              "1800000000.000001",
		"another chat":          `{"chat":"C2","mode":"stream","ts":["1800000000.000001"]}`,
		"no chat":               `{"mode":"stream","ts":["1800000000.000001"]}`,
		"no message":            `{"chat":"C1","mode":"stream","ts":[]}`,
		"a ts that is no ts":    `{"chat":"C1","mode":"stream","ts":["../../admin"]}`,
		"too many messages":     `{"chat":"C1","mode":"stream","ts":["1.1","1.2","1.3","1.4","1.5"]}`,
		"an unknown mode":       `{"chat":"C1","mode":"post","ts":["1.1"]}`,
		"two edited messages":   `{"chat":"C1","mode":"update","ts":["1.1","1.2"]}`,
		"oversized":             `{"chat":"C1","mode":"stream","ts":["1.1"],"x":"` + strings.Repeat("x", 2000) + `"}`,
		"empty":                 "",
		"a ts with a separator": `{"chat":"C1","mode":"update","ts":["1.1&channel=C2"]}`,
	}
	for name, ref := range cases {
		if sink, err := f.a.AdoptReply(context.Background(), m, ref); err == nil {
			t.Errorf("%s: AdoptReply = %v; want it refused", name, sink)
		}
	}
	if calls := f.slack.Calls(); len(calls) != 0 {
		t.Errorf("refused references made calls %v", calls)
	}
}

// TestIsTSIsThePattern holds isTS to the pattern it replaced,
// ^[0-9]{1,12}\.[0-9]{1,9}$, at every edge.
func TestIsTSIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,9}$`)
	for _, ts := range []string{
		"", ".", "1.", ".1", "1.1", "1712345678.123456", "123456789012.123456789", "1234567890123.1",
		"1.1234567890", "1.2.3", "a.1", "1.a", "-1.1", " 1.1", "1.1\n", "１.1",
	} {
		if got, want := isTS(ts), pattern.MatchString(ts); got != want {
			t.Errorf("isTS(%q) = %v, want %v", ts, got, want)
		}
	}
}
