package wechat

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wechattest"
	"github.com/parleyhq/parley/internal/redistest"
)

// liveWeCom starts a channel holding a fake WeCom bot's connection and
// returns it with a question asked just now on reqID.
func liveWeCom(t *testing.T, reqIDTTL time.Duration, reqID string) (*running, *wechattest.WeCom, channels.Message) {
	t.Helper()
	r := redistest.New(t)
	f := wechattest.NewWeCom(t, "aibot-live", "s3cret")
	cfg := wecomConfig(r, f, "A")
	cfg.ReqIDTTL = reqIDTTL
	rn := start(t, r, cfg, nil)
	// The fake counts the subscription before it acknowledges it; the
	// replica holds the connection (and streams) only once the ack is in.
	waitFor(t, "the subscription", func() bool { return rn.ch.wecom.current() != nil })
	m := channels.Message{Channel: Name, Workspace: "aibot-live", Chat: "grp-1", User: "zhangsan", Text: "tell me",
		Meta: map[string]string{"via": ViaWeCom, "req_id": reqID, "chatid": "grp-1", "recv_ms": strconv.FormatInt(time.Now().UnixMilli(), 10)}}
	return rn, f, m
}

// feed shows answer in pieces of n bytes, every gap, as a model writes.
func feed(t *testing.T, sink channels.ReplySink, answer string, n int, gap time.Duration) {
	t.Helper()
	for i := 0; i < len(answer); i += n {
		if _, err := sink.Show(context.Background(), channels.Progress{Kind: channels.ProgressText, Text: answer[i:min(i+n, len(answer))]}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(gap)
	}
}

// TestWeComLiveReplyCoalescesFrames: deltas every 20 ms reach WeCom as
// frames at least 500 ms apart, each a longer prefix of the answer, the
// last finishing it. Frame k cannot leave before start plus k intervals,
// so each is held to that bound on the fake's receive times: a loaded
// machine delays a frame but cannot move it earlier, where the gap
// between two arrivals narrows when the first is late.
func TestWeComLiveReplyCoalescesFrames(t *testing.T) {
	t.Parallel()
	rn, f, m := liveWeCom(t, time.Minute, "req-live")
	start := time.Now()
	sink, err := rn.ch.StartReply(context.Background(), m)
	if err != nil || sink == nil {
		t.Fatalf("StartReply = %v, %v", sink, err)
	}
	answer := strings.Repeat("word ", 60) + "end."
	feed(t, sink, answer, 5, 20*time.Millisecond)
	if err := sink.Finish(context.Background(), channels.Reply{Text: answer}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	frames := respondFrames(f, "req-live")
	if most := int(took/WeComFrameInterval) + 2; len(frames) < 2 || len(frames) > most {
		t.Fatalf("%d frames for %d deltas in %v; want them coalesced (at most %d), yet shown as they came", len(frames), len(answer)/5, took, most)
	}
	for i, fr := range frames {
		s := fr.Stream()
		if got, earliest := fr.At.Sub(start), time.Duration(i)*WeComFrameInterval; got < earliest {
			t.Errorf("frame %d arrived %v after the start; frames at least %v apart allow it no sooner than %v", i, got, WeComFrameInterval, earliest)
		}
		if !strings.HasPrefix(answer, s.Content) || s.Finish != (i == len(frames)-1) || s.ID != streamID("req-live") {
			t.Errorf("frame %d: %+v", i, s)
		}
	}
	if last := frames[len(frames)-1].Stream(); last.Content != answer {
		t.Errorf("the stream finished with %q, want the answer", last.Content)
	}
	if n := len(f.Frames("aibot_send_msg")); n != 0 {
		t.Errorf("%d extra messages; the answer fits the stream", n)
	}
}

// TestWeComLiveReplyContinuesPastTheStreamDeadline: an answer still being
// written at the req_id's deadline finishes the stream with the text so
// far, cut at a paragraph, and the rest follows as a message when the
// answer is complete — also when WeCom expires the stream first (846608).
// The stream closes while the answer is half written: the test waits for
// that (the deadline's finishing frame, or the first frame before WeCom
// expires the stream) and then writes the rest, so a slow machine cannot
// move the cut.
func TestWeComLiveReplyContinuesPastTheStreamDeadline(t *testing.T) {
	t.Parallel()
	var paras []string
	for i := range 6 {
		paras = append(paras, strings.Repeat(string(rune('a'+i)), 40))
	}
	answer := strings.Join(paras, "\n\n")
	before := len(paras[0]) + 2 + len(paras[1]) + 2 + 20 // written before the stream closes: into the third paragraph
	for _, tc := range []struct {
		name     string
		reqIDTTL time.Duration
		expire   bool // WeCom expires the stream after its first frame
	}{
		// The deadline must leave StartReply a frame interval; generous
		// for a loaded machine, and the test waits for it once.
		{"finished at its deadline", 2 * time.Second, false},
		{"expired by WeCom first", time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rn, f, m := liveWeCom(t, tc.reqIDTTL, "req-long")
			sink, err := rn.ch.StartReply(context.Background(), m)
			if err != nil || sink == nil {
				t.Fatalf("StartReply = %v, %v", sink, err)
			}
			feed(t, sink, answer[:before], 7, 0)
			if tc.expire {
				waitFor(t, "the stream's first frame", func() bool { return len(respondFrames(f, "req-long")) > 0 })
				f.ExpireStream(streamID("req-long"))
			} else {
				waitFor(t, "the stream finished at the deadline", func() bool { return finished(f, "req-long") })
			}
			feed(t, sink, answer[before:], 7, 40*time.Millisecond) // past a frame interval
			if err := sink.Finish(context.Background(), channels.Reply{Text: answer}); err != nil {
				t.Fatal(err)
			}
			// What the stream shows: its last accepted frame.
			kept := ""
			expired := 0
			for _, fr := range respondFrames(f, "req-long") {
				if fr.ErrCode == 0 {
					kept = fr.Stream().Content
				} else if fr.ErrCode == 846608 {
					expired++
				}
			}
			if tc.expire != (expired > 0) {
				t.Errorf("%d frames refused as expired", expired)
			}
			pushes := f.Frames("aibot_send_msg")
			if kept == "" || len(pushes) != 1 {
				t.Fatalf("stream shows %q, %d messages after it; want part of the answer, then the rest", kept, len(pushes))
			}
			chat, rest := pushes[0].Markdown()
			if chat != "grp-1" || !strings.HasPrefix(answer, kept) || strings.TrimSpace(answer[len(kept):]) != rest {
				t.Fatalf("stream %q then %q (to %s); want the answer once, in order", kept, rest, chat)
			}
			if want := paras[0] + "\n\n" + paras[1]; !tc.expire && kept != want {
				t.Errorf("the stream was finished with %q; want the text so far cut at its last paragraph, %q", kept, want)
			}
		})
	}
}

func TestWeComLiveReplyOnlyWhereThisReplicaHoldsTheConnection(t *testing.T) {
	t.Parallel()
	rn, _, m := liveWeCom(t, time.Minute, "req-x")
	ilink := channels.Message{Channel: Name, Chat: "u1", Meta: map[string]string{"via": ViaILink}}
	if sink, _ := rn.ch.StartReply(context.Background(), ilink); sink != nil {
		t.Error("an iLink answer is streamed")
	}
	old := m
	old.Meta = map[string]string{"via": ViaWeCom, "req_id": "req-old", "chatid": "grp-1", "recv_ms": strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)}
	if sink, _ := rn.ch.StartReply(context.Background(), old); sink != nil {
		t.Error("an answer to an expired req_id is streamed")
	}
	rn.stop()
	if sink, _ := rn.ch.StartReply(context.Background(), m); sink != nil {
		t.Error("streamed without the connection")
	}
}
