package wechat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/retry"
)

// Answers over WeCom: streamed on the message's req_id by the replica
// holding the connection, or queued in Redis by any other replica for the
// holder to deliver.

func jobFor(m channels.Message, kind, text string) wecomJob {
	ms, _ := strconv.ParseInt(m.Meta["recv_ms"], 10, 64)
	chat := m.Meta["chatid"]
	if chat == "" {
		chat = m.Chat
	}
	return wecomJob{Kind: kind, ReqID: m.Meta["req_id"], ChatID: chat, RecvMS: ms, Text: text}
}

// send answers m: directly when this replica holds the connection, else
// through the Redis queue the holder drains.
func (s *wecomSide) send(ctx context.Context, m channels.Message, text string) error {
	return s.sendJob(ctx, jobFor(m, "reply", text))
}

// sendJob delivers job directly when this replica holds the connection,
// else through the Redis queue.
func (s *wecomSide) sendJob(ctx context.Context, job wecomJob) error {
	if c := s.current(); c != nil {
		err := s.deliver(ctx, c, job)
		if !errors.Is(err, errConnClosed) {
			return err
		}
		s.log.Info("WeCom connection closed while answering; queueing the answer for the next connection")
	}
	return s.enqueue(ctx, job)
}

// typing opens the answer's stream with a placeholder frame, so the user
// sees that the bot is working.
func (s *wecomSide) typing(ctx context.Context, m channels.Message) {
	job := jobFor(m, "typing", "")
	if c := s.current(); c != nil {
		if err := s.deliver(ctx, c, job); err != nil {
			s.log.Debug("WeCom typing frame", "err", err)
		}
		return
	}
	if err := s.enqueue(ctx, job); err != nil {
		s.log.Debug("queue WeCom typing frame", "err", err)
	}
}

func (s *wecomSide) enqueue(ctx context.Context, job wecomJob) error {
	raw, err := json.Marshal(job)
	if err != nil {
		return err
	}
	_, err = s.adapter.opts.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.RPush(ctx, s.outbox, raw)
		p.Expire(ctx, s.outbox, time.Hour)
		return nil
	})
	if err != nil {
		return fmt.Errorf("wechat: queue WeCom reply: %w", err)
	}
	return nil
}

// drainOutbox delivers the replies other replicas queued, while this
// replica holds the connection.
func (s *wecomSide) drainOutbox(ctx context.Context, c *wecomConn) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		res, err := s.adapter.opts.Client.BLPop(ctx, time.Second, s.outbox).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("read the WeCom reply queue", "err", err)
				retry.Sleep(ctx, s.adapter.opts.RetryMin)
			}
			continue
		}
		var job wecomJob
		if len(res) != 2 || json.Unmarshal([]byte(res[1]), &job) != nil || job.ChatID == "" {
			s.adapter.reject("bad_frame")
			continue
		}
		wg.Go(func() {
			err := s.deliver(ctx, c, job)
			if err == nil {
				return
			}
			if job.Kind == "reply" && (errors.Is(err, errConnClosed) || ctx.Err() != nil) {
				// The connection ended under it: the next holder sends it.
				qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if qerr := s.enqueue(qctx, job); qerr == nil {
					return
				}
			}
			s.log.Error("deliver a queued WeCom reply", "err", err)
		})
	}
}

// lockReq serialises the frames of one req_id on this replica.
func (s *wecomSide) lockReq(reqID string) (*reqState, func()) {
	s.reqMu.Lock()
	st, ok := s.reqLocks[reqID]
	if !ok {
		st = &reqState{}
		s.reqLocks[reqID] = st
	}
	st.users++
	s.reqMu.Unlock()
	st.mu.Lock()
	return st, func() {
		st.mu.Unlock()
		s.reqMu.Lock()
		st.users--
		if st.users == 0 && !st.finished {
			delete(s.reqLocks, reqID)
		}
		s.reqMu.Unlock()
	}
}

// forget drops the finished marks of old req_ids.
func (s *wecomSide) forget() {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	if len(s.reqLocks) < 1024 {
		return
	}
	for id, st := range s.reqLocks {
		if st.users == 0 {
			delete(s.reqLocks, id)
		}
	}
}

// streamID is the same for every frame of one req_id on any replica.
func streamID(reqID string) string {
	sum := sha256.Sum256([]byte(reqID))
	return "parley-" + hex.EncodeToString(sum[:8])
}

func streamBody(reqID, content string, finish bool) map[string]any {
	return map[string]any{"msgtype": "stream", "stream": map[string]any{"id": streamID(reqID), "finish": finish, "content": content}}
}

// deliver sends a job over c. A reply finishes the stream on the message's
// req_id (aibot_respond_msg, finish:true) with its first part, in one
// frame — the live reply has shown the text as it came — and sends the
// rest, or all of it when the req_id is too old or WeCom refuses it, as
// new messages (aibot_send_msg).
func (s *wecomSide) deliver(ctx context.Context, c *wecomConn, job wecomJob) error {
	age := time.Since(time.UnixMilli(job.RecvMS))
	st, unlock := s.lockReq(job.ReqID)
	defer unlock()
	if job.Kind == "typing" {
		if st.finished || job.ReqID == "" || age > s.adapter.opts.ReqIDTTL || age > time.Minute {
			return nil
		}
		return s.respond(ctx, c, job.ReqID, typingContent, false)
	}
	defer s.forget()
	st.finished = true
	text := strings.TrimSpace(job.Text)
	if text == "" {
		text = "…"
	}
	parts := channels.Split(text, streamLimit)
	if job.ReqID != "" && age < s.adapter.opts.ReqIDTTL {
		body := streamBody(job.ReqID, parts[0], true)
		if len(job.Card) > 0 && len(parts) == 1 {
			// The approval prompt: its card under the finished text.
			body = cardStreamBody(job.ReqID, parts[0], job.Card)
		}
		err := s.respondBody(ctx, c, job.ReqID, body)
		if err == nil {
			return s.push(ctx, c, job.ChatID, parts[1:])
		}
		if errors.Is(err, errConnClosed) || ctx.Err() != nil {
			return err
		}
		s.log.Warn("WeCom refused the streamed answer; sending it as a new message", "err", err)
	}
	return s.push(ctx, c, job.ChatID, parts)
}

func (s *wecomSide) respond(ctx context.Context, c *wecomConn, reqID, content string, finish bool) error {
	return s.respondBody(ctx, c, reqID, streamBody(reqID, content, finish))
}

func (s *wecomSide) respondBody(ctx context.Context, c *wecomConn, reqID string, body any) error {
	ack, err := c.call(ctx, cmdRespond, reqID, body)
	if err != nil {
		return err
	}
	if ack.ErrCode != 0 {
		s.adapter.apiError(wecomCode(ack.ErrCode))
		return fmt.Errorf("aibot_respond_msg: errcode %d %s", ack.ErrCode, ack.ErrMsg)
	}
	return nil
}

// push sends parts as new markdown messages with aibot_send_msg.
func (s *wecomSide) push(ctx context.Context, c *wecomConn, chatID string, parts []string) error {
	for _, part := range parts {
		for _, chunk := range channels.Split(part, pushLimit) {
			ack, err := c.request(ctx, cmdSend, map[string]any{"chatid": chatID, "msgtype": "markdown", "markdown": map[string]string{"content": chunk}})
			if err != nil {
				return fmt.Errorf("wechat: aibot_send_msg: %w", err)
			}
			if ack.ErrCode != 0 {
				s.adapter.apiError(wecomCode(ack.ErrCode))
				s.log.Error("WeCom aibot_send_msg failed", "errcode", ack.ErrCode, "errmsg", ack.ErrMsg)
				return fmt.Errorf("wechat: aibot_send_msg: errcode %d %s", ack.ErrCode, ack.ErrMsg)
			}
		}
	}
	return nil
}
