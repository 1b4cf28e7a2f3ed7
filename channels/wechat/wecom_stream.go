package wechat

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// A WeCom AI bot's answer is one stream message on the question's req_id:
// frames of cumulative content, the last with finish:true. While the
// model writes, the replica holding the connection sends its text as it
// comes, coalesced to one frame every WeComFrameInterval at most (frames
// pushed one by one for every delta flood the client), the text merged in
// between sent by a timer when no more comes.
//
// WeCom lets a stream be updated for about six minutes (then errcode
// 846608, "stream message update expired"). A stream still open at the
// req_id's deadline (Options.ReqIDTTL from the question) is finished with
// the text so far, cut at a paragraph, and the rest of the answer is sent
// as new messages (aibot_send_msg) when it is complete; so is a stream
// WeCom expired first. The user is left with the answer once: the
// finished stream and the messages after it, in order.

// WeComFrameInterval is the least time between two frames of one stream.
const WeComFrameInterval = 500 * time.Millisecond

var _ channels.Streamer = (*Adapter)(nil)

// StartReply implements channels.Streamer: a live stream for an answer
// over WeCom, when this replica holds the bot's connection and the
// question's req_id is fresh; nil otherwise (the answer goes by Send).
func (a *Adapter) StartReply(_ context.Context, m channels.Message) (channels.ReplySink, error) {
	if m.Meta["via"] != ViaWeCom || a.wecom == nil || a.wecom.current() == nil {
		return nil, nil
	}
	job := jobFor(m, "reply", "")
	deadline := time.UnixMilli(job.RecvMS).Add(a.opts.ReqIDTTL)
	if job.ReqID == "" || time.Until(deadline) < WeComFrameInterval {
		return nil, nil
	}
	ctx := a.runContext()
	if ctx == nil {
		ctx = context.Background()
	}
	k := &wecomSink{s: a.wecom, job: job, ctx: ctx, last: time.Now()}
	k.deadline = time.AfterFunc(time.Until(deadline), k.closeAtDeadline)
	return k, nil
}

// wecomSink is one live WeCom answer.
type wecomSink struct {
	s        *wecomSide
	job      wecomJob        // req_id, chat, arrival
	ctx      context.Context // of the adapter's Run: the timers' frames
	deadline *time.Timer     // finishes the stream before WeCom expires it

	mu     sync.Mutex
	text   string // the answer so far (since the last reset)
	status string // the tool or skill at work
	shown  string // the content of the last frame
	last   time.Time
	flush  *time.Timer // sends text merged since the last frame
	closed bool        // the stream is finished or expired: kept stays
	kept   string      // what the closed stream shows of the answer
	done   bool        // Finish or Discard ran
}

// Show implements channels.ReplySink. It never waits for the frame
// interval: text that comes sooner is sent by the flush timer.
func (k *wecomSink) Show(ctx context.Context, p channels.Progress) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch p.Kind {
	case channels.ProgressText:
		k.text += p.Text
		k.status = ""
	case channels.ProgressReset:
		k.text = ""
	case channels.ProgressTool:
		k.status = "Running " + p.Name + "…"
	case channels.ProgressSkill:
		k.status = "Using skill " + p.Name + "…"
	}
	if k.closed || k.done {
		return false, nil
	}
	k.sendLocked(ctx)
	return k.shown != "", nil
}

// render is the stream's content now.
func (k *wecomSink) render() string {
	text := strings.TrimSpace(k.text)
	if parts := channels.Split(text, streamLimit); len(parts) > 1 {
		text = parts[0]
	}
	switch {
	case k.status == "":
	case text == "":
		text = "*" + k.status + "*"
	default:
		text += "\n\n*" + k.status + "*"
	}
	return text
}

// sendLocked sends the content when it changed and the interval has
// passed, or arms the flush timer for when it will have. k.mu is held.
func (k *wecomSink) sendLocked(ctx context.Context) {
	body := k.render()
	if body == "" || body == k.shown {
		return
	}
	if wait := time.Until(k.last.Add(WeComFrameInterval)); wait > 0 {
		if k.flush == nil {
			k.flush = time.AfterFunc(wait, k.flushNow)
		}
		return
	}
	err := k.frame(ctx, body, false)
	k.last = time.Now()
	if err != nil {
		// Expired or refused: what was shown stays, the rest follows as
		// messages when the answer is complete.
		k.s.log.Warn("WeCom stream frame refused; the rest of the answer follows as messages", "err", err)
		k.closed, k.kept = true, k.shownAnswer()
		return
	}
	k.shown = body
}

func (k *wecomSink) flushNow() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.flush = nil
	if k.closed || k.done {
		return
	}
	k.sendLocked(k.ctx)
}

// shownAnswer is the part of the answer the last frame shows (without the
// status line).
func (k *wecomSink) shownAnswer() string {
	shown := k.shown
	if k.status != "" {
		shown = strings.TrimSuffix(strings.TrimSuffix(shown, "*"+k.status+"*"), "\n\n")
	}
	if !strings.HasPrefix(strings.TrimSpace(k.text), shown) {
		return "" // a status alone, or withdrawn text
	}
	return shown
}

// frame sends one stream frame on the req_id, through the connection this
// replica holds.
func (k *wecomSink) frame(ctx context.Context, content string, finish bool) error {
	c := k.s.current()
	if c == nil {
		return errConnClosed
	}
	st, unlock := k.s.lockReq(k.job.ReqID)
	defer unlock()
	if st.finished {
		return errors.New("wechat: the WeCom stream is already finished")
	}
	if err := k.s.respond(ctx, c, k.job.ReqID, content, finish); err != nil {
		return err
	}
	if finish {
		st.finished = true
	}
	return nil
}

// closeAtDeadline finishes the stream before WeCom would expire it, with
// the text so far up to its last paragraph (or "…" when there is none).
func (k *wecomSink) closeAtDeadline() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed || k.done {
		return
	}
	k.closed = true
	keep := paragraphPrefix(strings.TrimSpace(k.text))
	content := keep
	if content == "" {
		content = typingContent
	}
	if err := k.frame(k.ctx, content, true); err != nil {
		k.s.log.Warn("cannot finish the WeCom stream at its deadline; the answer follows as messages", "err", err)
		k.kept = k.shownAnswer()
		return
	}
	k.kept, k.shown = keep, content
}

// paragraphPrefix is text up to its last paragraph break (or line break),
// or all of it when it has neither.
func paragraphPrefix(text string) string {
	if i := strings.LastIndex(text, "\n\n"); i > 0 {
		return strings.TrimSpace(text[:i])
	}
	if i := strings.LastIndex(text, "\n"); i > 0 {
		return strings.TrimSpace(text[:i])
	}
	return text
}

// stop ends the timers; k.mu is held.
func (k *wecomSink) stop() {
	k.done = true
	k.deadline.Stop()
	if k.flush != nil {
		k.flush.Stop()
		k.flush = nil
	}
}

// Finish implements channels.ReplySink: the stream is finished with the
// answer (its first 20,000 bytes), and what the stream cannot hold — the
// rest of a long answer, or all that follows a stream closed or expired
// before — is sent as new messages after it.
func (k *wecomSink) Finish(ctx context.Context, r channels.Reply) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stop()
	answer := strings.TrimSpace(r.Text)
	if !k.closed {
		// The last frame too keeps the interval.
		if wait := time.Until(k.last.Add(WeComFrameInterval)); wait > 0 && !retry.Sleep(ctx, wait) {
			return ctx.Err()
		}
		first := typingContent
		if parts := channels.Split(answer, streamLimit); len(parts) > 0 {
			first = parts[0]
		}
		err := k.frame(ctx, first, true)
		switch {
		case err == nil:
			k.kept = first
		case errors.Is(err, errConnClosed) || ctx.Err() != nil:
			// The connection is gone: the next holder finishes the stream.
			job := k.job
			job.Text = answer
			return k.s.sendJob(ctx, job)
		default:
			k.s.log.Warn("WeCom refused the stream's last frame; the rest of the answer follows as messages", "err", err)
			k.kept = k.shownAnswer()
		}
		k.closed = true
	}
	rest := answer
	if k.kept != "" && strings.HasPrefix(answer, k.kept) {
		rest = strings.TrimSpace(answer[len(k.kept):])
	} else if k.kept != "" {
		k.s.log.Warn("the closed WeCom stream shows text the answer no longer has; sending the whole answer after it")
	}
	if rest == "" {
		return nil
	}
	job := k.job
	job.ReqID, job.Text = "", rest // new messages, not the stream
	return k.s.sendJob(ctx, job)
}

// Discard implements channels.ReplySink: the text shown is withdrawn
// ("…"), the stream left open for what answers the message instead (a
// notice, or the turn run again), which finishes it.
func (k *wecomSink) Discard(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stop()
	if k.closed || k.shown == "" || k.shown == typingContent {
		return nil
	}
	return k.frame(ctx, typingContent, false)
}
