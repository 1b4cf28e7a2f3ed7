package slack

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/slack/slacktest"
)

// onceFixture is a live fixture whose Web API calls give up after a short
// timeout, so that a fake Slack that never answers is given up on soon.
func onceFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixture(t, func(_ *Config, o *Options) {
		o.AppendEvery, o.UpdateEvery = time.Nanosecond, time.Nanosecond
		o.HTTPClient = &http.Client{Timeout: 300 * time.Millisecond}
	})
}

// marked reports the delivery id in a message's metadata, or "".
func marked(t *testing.T, m slacktest.Msg) string {
	t.Helper()
	var md struct {
		EventType    string `json:"event_type"`
		EventPayload struct {
			DeliveryID string `json:"delivery_id"`
		} `json:"event_payload"`
	}
	if m.Metadata == "" {
		return ""
	}
	if err := json.Unmarshal([]byte(m.Metadata), &md); err != nil {
		t.Fatalf("metadata %q: %v", m.Metadata, err)
	}
	if md.EventType != MetadataEventType {
		t.Fatalf("metadata event type %q", md.EventType)
	}
	return md.EventPayload.DeliveryID
}

// TestExactlyOnceWhenSlackPostsAndFailsToAnswer: Slack starts the stream
// (or posts the message) and its answer is lost; the next try finds the
// message in the thread by its metadata instead of writing the answer
// again, so the thread holds it once.
func TestExactlyOnceWhenSlackPostsAndFailsToAnswer(t *testing.T) {
	t.Parallel()
	const whole = "The answer, streamed once."

	t.Run("a stream started without an answer", func(t *testing.T) {
		t.Parallel()
		f := onceFixture(t)
		f.slack.Fail("chat.startStream", slacktest.Failure{Written: true, Hang: true})
		answer(t, f.a, liveMsg(slacktest.TeamID), "The answer, ", "streamed once.")
		got := onlyVisible(t, f.slack, whole)
		if !got.Streamed || marked(t, got) == "" {
			t.Errorf("the message is %+v; want the stream Slack started, marked", got)
		}
		if n := f.slack.Count("chat.postMessage"); n != 0 {
			t.Errorf("%d chat.postMessage calls; want none: the stream was found", n)
		}
		checkLookups(t, f.slack, "conversations.replies")
	})

	t.Run("a post answered 5xx after the write", func(t *testing.T) {
		t.Parallel()
		f := onceFixture(t)
		f.slack.Fail("chat.postMessage", slacktest.Failure{Written: true, Status: http.StatusBadGateway})
		if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: whole}); err != nil {
			t.Fatal(err)
		}
		got := onlyVisible(t, f.slack, whole)
		if marked(t, got) == "" {
			t.Errorf("the post %+v carries no delivery id", got)
		}
		checkLookups(t, f.slack, "conversations.replies")
	})

	t.Run("a post outside a thread that was never answered", func(t *testing.T) {
		t.Parallel()
		f := onceFixture(t)
		f.slack.Fail("chat.postMessage", slacktest.Failure{Written: true, Hang: true})
		dm := channels.Message{Channel: Name, Chat: "D1", DM: true, Meta: map[string]string{MetaTS: "5.5"}}
		if err := f.a.Send(t.Context(), dm, channels.Reply{Text: whole}); err != nil {
			t.Fatal(err)
		}
		if v := f.slack.Visible(); len(v) != 1 || v[0].Text != whole {
			t.Fatalf("the DM shows %+v; want the answer once", v)
		}
		checkLookups(t, f.slack, "conversations.history")
	})

	t.Run("a post refused is posted again without a look", func(t *testing.T) {
		t.Parallel()
		f := onceFixture(t)
		f.slack.Fail("chat.postMessage", slacktest.Failure{Status: http.StatusTooManyRequests, RetryAfter: "0"})
		if err := f.a.Send(t.Context(), threadMsg(), channels.Reply{Text: whole}); err != nil {
			t.Fatal(err)
		}
		onlyVisible(t, f.slack, whole)
		if l := f.slack.Lookups(); len(l) != 0 {
			t.Errorf("lookups %+v after a rate limit; want none (nothing was written)", l)
		}
	})
}

// checkLookups checks that the thread was read back by method, bounded
// and with the messages' metadata.
func checkLookups(t *testing.T, fake *slacktest.Server, method string) {
	t.Helper()
	l := fake.Lookups()
	if len(l) == 0 {
		t.Fatalf("the thread was never read back")
	}
	for _, c := range l {
		if c.Method != method || !c.Metadata || c.Limit <= 0 || c.Limit > lookupLimit || c.Oldest == "" {
			t.Errorf("lookup %+v; want %s, include_all_metadata, limit 1..%d, oldest", c, method, lookupLimit)
		}
	}
}

// TestFindMarkedPagesBounded: the look for a marked message follows the
// thread's pages, and stops after lookupPages of them.
func TestFindMarkedPagesBounded(t *testing.T) {
	t.Parallel()
	f := onceFixture(t)
	m := threadMsg()
	for i := range lookupLimit + 3 {
		if _, err := f.a.postText(t.Context(), m, "filler", partKey("other", i)); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := f.a.postText(t.Context(), m, "the one", "wanted.0")
	if err != nil {
		t.Fatal(err)
	}
	found, err := f.a.findMarked(t.Context(), m, "wanted.0", time.Now().Add(-time.Minute))
	if err != nil || found != ts {
		t.Fatalf("findMarked = %q, %v; want %q on the second page", found, err, ts)
	}
	if l := f.slack.Lookups(); len(l) != 2 || l[1].Cursor == "" {
		t.Fatalf("lookups %+v; want two pages", l)
	}
	if found, _ := f.a.findMarked(t.Context(), m, "absent.0", time.Now().Add(-time.Minute)); found != "" {
		t.Fatalf("found %q for a key never posted", found)
	}
	if n := len(f.slack.Lookups()); n > 2+lookupPages {
		t.Fatalf("%d lookups for an absent key; want at most %d pages", n-2, lookupPages)
	}
}
