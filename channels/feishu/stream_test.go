package feishu

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

// streamAnswer feeds answer to a new live reply in pieces of n bytes and
// finishes it as the gateway does: a Finish error means the gateway
// sends the answer with Send. It reports whether Finish delivered.
func streamAnswer(t *testing.T, f *fixture, m channels.Message, answer string, n int, during func(i int)) bool {
	t.Helper()
	ctx := context.Background()
	sink, err := f.ch.StartReply(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if sink == nil {
		if err := f.ch.Send(ctx, m, channels.Reply{Text: answer}); err != nil {
			t.Fatal(err)
		}
		return false
	}
	failed := false
	if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressTool, Name: "search"}); err != nil {
		failed = true
	}
	for i := 0; i < len(answer); i += n {
		if during != nil {
			during(i)
		}
		if failed {
			continue // the gateway stops calling Show after an error
		}
		if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: answer[i:min(i+n, len(answer))]}); err != nil {
			failed = true
		}
	}
	if err := sink.Finish(ctx, channels.Reply{Text: answer}); err != nil {
		if err := f.ch.Send(ctx, m, channels.Reply{Text: answer}); err != nil {
			t.Fatal(err)
		}
		return false
	}
	return true
}

// onlyVisible checks that the user is left with exactly one message, whose
// text is the answer.
func onlyVisible(t *testing.T, api *feishutest.Server, answer string) feishutest.Visible {
	t.Helper()
	vis := api.Visible()
	if len(vis) != 1 {
		t.Fatalf("%d messages visible, want the answer once: %+v", len(vis), vis)
	}
	if vis[0].Text != answer {
		t.Fatalf("visible text %q, want the answer %q", vis[0].Text, answer)
	}
	return vis[0]
}

func fallbacks(f *fixture, from, to string) float64 {
	return testutil.ToFloat64(f.m.ReplyStreamFallbacks.WithLabelValues(Name, from, to))
}

const liveAnswer = "Feishu streams this answer into a card, piece by piece, and closes it with exactly the stored text."

func TestLiveReplyStreamsIntoACardKitCard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
	if !streamAnswer(t, f, groupMsg(), liveAnswer, 7, nil) {
		t.Fatal("Finish did not deliver")
	}
	v := onlyVisible(t, f.api, liveAnswer)
	if v.CardID == "" || v.Streaming {
		t.Fatalf("visible %+v; want a card entity out of streaming mode", v)
	}
	sent := f.api.Sent()
	if len(sent) != 1 || sent[0].ReplyTo != "om_q" || !sent[0].ReplyInThread || sent[0].CardID != v.CardID {
		t.Fatalf("sent %+v; want one reply in the thread carrying the card", sent)
	}
	calls := f.api.Calls()
	if calls[0].Content != "*Running search…*" {
		t.Errorf("the card was made showing %q; want the running tool", calls[0].Content)
	}
	if calls[0].Op != feishutest.OpCardCreate || calls[len(calls)-1].Op != feishutest.OpCardSettings {
		t.Fatalf("calls %+v; want card_create first, card_settings last", calls)
	}
	updates, seq := 0, 0
	for _, c := range calls[1:] {
		if c.Refused || c.CardID != v.CardID || c.Sequence <= seq {
			t.Fatalf("call %+v after sequence %d", c, seq)
		}
		seq = c.Sequence
		if c.Op == feishutest.OpCardContent {
			updates++
			if !strings.HasPrefix(liveAnswer, c.Content) {
				t.Errorf("update %q is not a prefix of the answer", c.Content)
			}
		}
	}
	if updates < 3 {
		t.Errorf("%d element updates; want the answer shown as it came", updates)
	}
	if cards := f.api.Cards(); len(cards) != 1 || cards[0].Summary == "" || cards[0].Summary == "…" {
		t.Errorf("cards %+v; want one, with the answer's summary", cards)
	}
	if ok, _ := f.ch.state.followed(context.Background(), "oc_g:om_q"); !ok {
		t.Error("the thread answered live was not remembered")
	}
	if v := fallbacks(f, modeCardKit, modePatch) + fallbacks(f, modeCardKit, modePost); v != 0 {
		t.Errorf("%v fallbacks", v)
	}
}

func TestLiveReplyCardKitRefusedPatchesACard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
	f.api.RefuseCardKit(true)
	if !streamAnswer(t, f, groupMsg(), liveAnswer, 9, nil) {
		t.Fatal("Finish did not deliver")
	}
	v := onlyVisible(t, f.api, liveAnswer)
	if v.CardID != "" || v.MsgType != "interactive" {
		t.Fatalf("visible %+v; want a patched interactive card", v)
	}
	patches := 0
	for _, c := range f.api.Calls() {
		if c.Op == feishutest.OpPatch && !c.Refused {
			patches++
		}
	}
	if patches < 2 {
		t.Errorf("%d patches; want the answer shown as it came", patches)
	}
	if v := fallbacks(f, modeCardKit, modePatch); v != 1 {
		t.Errorf("cardkit→patch fallbacks = %v", v)
	}
	// The workspace remembers: the next reply does not try CardKit.
	before := len(f.api.Calls())
	streamAnswer(t, f, groupMsg(), "second answer", 100, nil)
	for _, c := range f.api.Calls()[before:] {
		if c.Op == feishutest.OpCardCreate {
			t.Fatal("CardKit tried again right after it was refused")
		}
	}
}

func TestLiveReplyEveryModeRefusedPostsOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
	f.api.RefuseCardKit(true)
	f.api.RefuseCards(true) // so the shared card is refused too; Send falls back to text
	if streamAnswer(t, f, groupMsg(), liveAnswer, 9, nil) {
		t.Fatal("Finish claims to have delivered with nothing shown")
	}
	v := onlyVisible(t, f.api, liveAnswer)
	if v.MsgType != "text" {
		t.Fatalf("visible %+v; want the plain post", v)
	}
	if a, b := fallbacks(f, modeCardKit, modePatch), fallbacks(f, modePatch, modePost); a != 1 || b != 1 {
		t.Errorf("fallbacks cardkit→patch %v, patch→post %v; want 1 and 1", a, b)
	}
	if sink, err := f.ch.StartReply(context.Background(), groupMsg()); sink != nil || err != nil {
		t.Errorf("StartReply = %v, %v; want no live reply where every mode was refused", sink, err)
	}
}

func TestLiveReplyFailingHalfwayLeavesOneCompleteMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		failures int // card_content failures injected halfway
		finished bool
	}{
		{"the card is completed when updates work again", 3, true},
		{"the card is removed and the answer posted", 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
			half := len(liveAnswer) / 2
			injected := false
			delivered := streamAnswer(t, f, groupMsg(), liveAnswer, 5, func(i int) {
				if i >= half && !injected {
					injected = true
					for range tc.failures {
						f.api.Fail(feishutest.OpCardContent, feishutest.Failure{Status: 500, Code: 1000004, Msg: "internal error"})
					}
				}
			})
			if delivered != tc.finished {
				t.Fatalf("Finish delivered = %v, want %v", delivered, tc.finished)
			}
			v := onlyVisible(t, f.api, liveAnswer)
			if tc.finished && v.CardID == "" {
				t.Errorf("visible %+v; want the live card, completed", v)
			}
			if !tc.finished {
				recalled := 0
				for _, c := range f.api.Calls() {
					if c.Op == feishutest.OpDelete && !c.Refused {
						recalled++
					}
				}
				if recalled != 1 || fallbacks(f, modeCardKit, modePost) != 1 {
					t.Errorf("%d recalls, %v cardkit→post; want the partial card removed once", recalled, fallbacks(f, modeCardKit, modePost))
				}
			}
		})
	}
}

func TestLiveReplyLongAnswerContinuesInCards(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond; o.ChunkBytes = 100 })
	var paras []string
	for i := range 4 {
		paras = append(paras, strings.Repeat(string(rune('a'+i)), 80))
	}
	answer := strings.Join(paras, "\n\n")
	if !streamAnswer(t, f, groupMsg(), answer, 30, nil) {
		t.Fatal("Finish did not deliver")
	}
	vis := f.api.Visible()
	var got []string
	for _, v := range vis {
		got = append(got, v.Text)
	}
	if strings.Join(got, "\n\n") != answer || len(vis) != 4 || vis[0].CardID == "" {
		t.Fatalf("visible %+v; want the card with the first part, then the rest as cards", vis)
	}
	// Posting the answer again (the gateway's retry) repeats the uuids of
	// the parts after the card.
	if err := f.ch.Send(context.Background(), groupMsg(), channels.Reply{Text: answer}); err != nil {
		t.Fatal(err)
	}
	if f.api.Duplicates() != 3 {
		t.Errorf("%d duplicates dropped; want the three parts after the card", f.api.Duplicates())
	}
}

// TestCardUpdatesAtMostTenASecond: a fast model's many deltas reach the
// card at most 10 times in any second, counted from the times the fake
// received the calls.
func TestCardUpdatesAtMostTenASecond(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o) }) // the default interval
	answer := strings.Repeat("token ", 300)
	deadline := time.Now().Add(1500 * time.Millisecond)
	ctx := context.Background()
	sink, err := f.ch.StartReply(ctx, groupMsg())
	if err != nil || sink == nil {
		t.Fatal(sink, err)
	}
	for i := 0; i < len(answer); i += 6 {
		if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: answer[i:min(i+6, len(answer))]}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			break // enough updates to measure
		}
	}
	if err := sink.Finish(ctx, channels.Reply{Text: strings.TrimSpace(answer)}); err != nil {
		t.Fatal(err)
	}
	var at []time.Time
	for _, c := range f.api.Calls() {
		if c.Op == feishutest.OpCardContent || c.Op == feishutest.OpCardSettings {
			at = append(at, c.At)
		}
	}
	if len(at) < 5 {
		t.Fatalf("%d card updates; too few to measure", len(at))
	}
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		if n > 10 {
			t.Fatalf("%d card updates within a second from update %d; Feishu allows 10", n, i)
		}
	}
	onlyVisible(t, f.api, strings.TrimSpace(answer))
}

func TestLiveReplyDiscardRecallsTheCard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
	ctx := context.Background()
	sink, _ := f.ch.StartReply(ctx, groupMsg())
	if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: "half an answer"}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Discard(ctx); err != nil {
		t.Fatal(err)
	}
	if vis := f.api.Visible(); len(vis) != 0 {
		t.Fatalf("visible after Discard: %+v", vis)
	}
	// A sink that showed nothing has nothing to recall.
	sink, _ = f.ch.StartReply(ctx, groupMsg())
	if err := sink.Discard(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLiveReplyAnswerWithoutIDIsARefusal: a card_create that succeeds
// without its card_id, then a card post without its message_id, are
// refusals of those methods: the reply moves on to the next mode (and
// remembers it) and the answer is shown once, never a card updated or
// patched without an id.
func TestLiveReplyAnswerWithoutIDIsARefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
	f.api.Fail(feishutest.OpCardCreate, feishutest.Failure{Status: 200, Code: 0, Msg: "success"})
	if !streamAnswer(t, f, groupMsg(), liveAnswer, 9, nil) {
		t.Fatal("Finish did not deliver")
	}
	onlyVisible(t, f.api, liveAnswer)
	if v := fallbacks(f, modeCardKit, modePatch); v != 1 {
		t.Errorf("cardkit→patch fallbacks = %v, want 1", v)
	}
	before := len(f.api.Calls())
	streamAnswer(t, f, groupMsg(), "second answer", 100, nil)
	for _, c := range f.api.Calls()[before:] {
		if c.Op == feishutest.OpCardCreate {
			t.Fatal("CardKit tried again right after answering without a card_id")
		}
	}
}

func TestLiveReplyCardPostWithoutMessageIDIsARefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { every(c, o); o.CardUpdateInterval = time.Millisecond })
	f.api.RefuseCardKit(true)
	f.api.Fail("reply", feishutest.Failure{Status: 200, Code: 0, Msg: "success"})
	streamAnswer(t, f, groupMsg(), liveAnswer, 9, nil)
	onlyVisible(t, f.api, liveAnswer)
	if v := fallbacks(f, modePatch, modePost); v != 1 {
		t.Errorf("patch→post fallbacks = %v, want 1: a card without its message_id cannot be patched", v)
	}
	for _, c := range f.api.Calls() {
		if c.Op == feishutest.OpPatch {
			t.Fatalf("a card was patched after its post answered without a message_id: %+v", c)
		}
	}
}

// every has a live card take every piece of text as it comes, for the
// tests of what the platform sees of each update.
func every(c *Config, o *Options) { c.StreamEvery, o.StreamMinChars = time.Nanosecond, 1 }

// TestLiveCardCoalescesUpdatesByItsPace: a model that writes its answer
// in many small pieces updates the card at most once per stream_every
// while it writes (counted against the time the writing took, so a slow
// machine cannot fail it), and the card ends with the whole answer.
func TestLiveCardCoalescesUpdatesByItsPace(t *testing.T) {
	t.Parallel()
	const streamEvery = 100 * time.Millisecond
	f := newFixture(t, func(c *Config, o *Options) { c.StreamEvery, o.CardUpdateInterval = streamEvery, time.Millisecond })
	answer := strings.Repeat("a word or two, ", 30)
	ctx := context.Background()
	sink, err := f.ch.StartReply(ctx, groupMsg())
	if err != nil || sink == nil {
		t.Fatal(sink, err)
	}
	start := time.Now()
	for i := 0; i < len(answer); i += 15 {
		if _, err := sink.Show(ctx, channels.Progress{Kind: channels.ProgressText, Text: answer[i:min(i+15, len(answer))]}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(streamEvery / 7) // 30 pieces over about 4.5 paces
	}
	took := time.Since(start)
	if err := sink.Finish(ctx, channels.Reply{Text: strings.TrimSpace(answer)}); err != nil {
		t.Fatal(err)
	}
	updates := 0
	for _, c := range f.api.Calls() {
		if c.Op == feishutest.OpCardContent {
			updates++
		}
	}
	// One update per pace the writing took, and the final one.
	if most := int(took/streamEvery) + 2; updates > most || updates < 2 {
		t.Errorf("%d card updates for 30 pieces written in %v; want between 2 and %d at one per %v", updates, took, most, streamEvery)
	}
	onlyVisible(t, f.api, strings.TrimSpace(answer))
}
