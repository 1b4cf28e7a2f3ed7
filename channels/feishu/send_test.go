package feishu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/feishu/feishutest"
)

func groupMsg() channels.Message {
	return channels.Message{ID: "om_q", Channel: Name, Workspace: "t", Chat: "oc_g", Thread: "om_q",
		Meta: map[string]string{MetaMessageID: "om_q", MetaChatType: "group", MetaThreadKey: "oc_g:om_q", MetaInThread: "1"}}
}

func TestLongAnswerSplitIntoCards(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config, o *Options) { o.ChunkBytes = 100 })
	var paras []string
	for i := 0; i < 6; i++ {
		paras = append(paras, strings.Repeat("word ", 15)+"end.")
	}
	text := "# Title\n\n" + strings.Join(paras, "\n\n")
	if err := f.ch.Send(context.Background(), groupMsg(), channels.Reply{Text: text}); err != nil {
		t.Fatal(err)
	}
	sent := f.api.Sent()
	if len(sent) < 6 {
		t.Fatalf("%d cards for %d bytes at 100 per card", len(sent), len(text))
	}
	uuids := map[string]bool{}
	for _, s := range sent {
		if s.MsgType != "interactive" || s.ReplyTo != "om_q" || !s.ReplyInThread || len(s.Text) > 100 {
			t.Errorf("card %+v", s)
		}
		if s.UUID == "" || len(s.UUID) > 50 || uuids[s.UUID] {
			t.Errorf("uuid %q missing, too long or repeated", s.UUID)
		}
		uuids[s.UUID] = true
	}
	if !strings.HasPrefix(sent[0].Text, "**Title**\n") {
		t.Errorf("heading not adapted for the card: %q", sent[0].Text)
	}
	// Sending the same answer again (a retried turn) repeats the uuids, so
	// Feishu drops every piece.
	if err := f.ch.Send(context.Background(), groupMsg(), channels.Reply{Text: text}); err != nil {
		t.Fatal(err)
	}
	if got := f.api.Duplicates(); got != len(sent) {
		t.Fatalf("%d duplicates dropped; want %d", got, len(sent))
	}
}

func TestCardRefusedFallsBackToText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.api.RefuseCards(true)
	if err := f.ch.Send(context.Background(), groupMsg(), channels.Reply{Text: "plain please"}); err != nil {
		t.Fatal(err)
	}
	sent := f.api.Sent()
	if len(sent) != 1 || sent[0].MsgType != "text" || sent[0].Text != "plain please" || !sent[0].ReplyInThread {
		t.Fatalf("fallback %+v", sent)
	}
	if v := testutil.ToFloat64(f.m.ChannelAPIErrors.WithLabelValues(Name, "230099")); v != 1 {
		t.Errorf("api_errors{code=230099} = %v", v)
	}
}

func TestRetryableAPIErrorIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.api.Fail("reply", feishutest.Failure{Status: 400, Code: 230020, Msg: "frequency limit"}, feishutest.Failure{Status: 503, Code: 1, Msg: "unavailable"})
	if err := f.ch.Send(context.Background(), groupMsg(), channels.Reply{Text: "eventually"}); err != nil {
		t.Fatal(err)
	}
	if sent := f.api.Sent(); len(sent) != 1 || sent[0].MsgType != "interactive" {
		t.Fatalf("sent %+v", sent)
	}
	if v := testutil.ToFloat64(f.m.ChannelAPIErrors.WithLabelValues(Name, "230020")); v != 1 {
		t.Errorf("api_errors{code=230020} = %v", v)
	}
}

func TestPermanentAPIErrorIsReported(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.api.Fail("reply", feishutest.Failure{Code: 230002, Msg: "bot not in chat"}, feishutest.Failure{Code: 230002, Msg: "bot not in chat"})
	err := f.ch.Send(context.Background(), groupMsg(), channels.Reply{Text: "x"})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 230002 || apiErr.LogID != "fake-failure-log" || apiErr.Msg != "bot not in chat" {
		t.Fatalf("err = %#v", err)
	}
	// Card, then the text fallback: two attempts, no retries.
	if v := testutil.ToFloat64(f.m.ChannelAPIErrors.WithLabelValues(Name, "230002")); v != 2 {
		t.Errorf("api_errors{code=230002} = %v; want 2", v)
	}
}

func TestTypingReaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	stop := f.ch.StartTyping(context.Background(), groupMsg())
	stop()
	stop() // idempotent
	rs := f.api.Reactions()
	if len(rs) != 1 || rs[0].MessageID != "om_q" || rs[0].Emoji != "Typing" || !rs[0].Removed {
		t.Fatalf("reactions %+v", rs)
	}
	// A failing reaction is only logged and counted.
	f.api.Fail("reaction", feishutest.Failure{Code: 231001, Msg: "reaction type is invalid"})
	f.ch.StartTyping(context.Background(), groupMsg())()
	if v := testutil.ToFloat64(f.m.ChannelAPIErrors.WithLabelValues(Name, "231001")); v != 1 {
		t.Errorf("api_errors{code=231001} = %v", v)
	}
}

func TestChatLimiterSpacesOneChat(t *testing.T) {
	t.Parallel()
	l := newChatLimiter(50 * time.Millisecond)
	start := time.Now()
	for i := 0; i < 4; i++ {
		if err := l.wait(context.Background(), "oc_1"); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("4 sends to one chat took %v; want at least 150ms", d)
	}
	slow := newChatLimiter(time.Hour)
	if err := slow.wait(context.Background(), "oc_1"); err != nil {
		t.Fatal(err)
	}
	if err := slow.wait(context.Background(), "oc_2"); err != nil {
		t.Fatal("another chat waited for oc_1")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := slow.wait(ctx, "oc_1"); err == nil {
		t.Fatal("wait ignored a cancelled context while the chat was busy")
	}
}

func TestLarkDomain(t *testing.T) {
	t.Parallel()
	c, err := New(Config{AppID: "a", AppSecret: "b", Domain: "lark", VerificationToken: "t"}, Options{}, nil, nil)
	if err != nil || c.BaseURL() != LarkBaseURL {
		t.Fatalf("lark domain: %v %v", c, err)
	}
	c, err = New(Config{AppID: "a", AppSecret: "b", VerificationToken: "t"}, Options{}, nil, nil)
	if err != nil || c.BaseURL() != FeishuBaseURL {
		t.Fatalf("default domain: %v", err)
	}
	c, err = New(Config{AppID: "a", AppSecret: "b", Domain: "lark", BaseURL: "http://fake/", VerificationToken: "t"}, Options{}, nil, nil)
	if err != nil || c.BaseURL() != "http://fake" {
		t.Fatalf("base URL override: %v", err)
	}
}
