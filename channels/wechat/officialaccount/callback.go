package officialaccount

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/channels/wechat/wxapi"
	"github.com/parleyhq/parley/channels/wechat/wxcrypto"
)

// Reasons a callback is refused besides wxcrypto's: the reason label of
// parley_messages_rejected_total.
const (
	ReasonTooLarge    = "too_large"
	ReasonUnavailable = "unavailable"
	// ReasonUnencrypted: a plaintext callback although an EncodingAESKey
	// is configured (or an encrypted one without it).
	ReasonUnencrypted = "unencrypted"
)

// MetaMsgID is the Message.Meta key of the WeChat MsgId: Send offers the
// answer of such a message to its waiting callback first.
const MetaMsgID = "msg_id"

// unsupportedNote is the passive reply to a message Parley cannot read.
const unsupportedNote = "Sorry, I can only read text, images (and voice messages WeChat transcribes) for now. Please send your question as text."

// errUnencrypted is a callback in the wrong message mode.
var errUnencrypted = errors.New("wechat_oa: callback not in the configured message mode")

// Mount implements channels.HTTPChannel: GET and POST /wechat/oa (the
// default account's), /wechat/oa/NAME (another's).
func (a *Adapter) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET "+a.route(Path), a.verifyURL)
	mux.HandleFunc("POST "+a.route(Path), a.callback)
}

// refuse answers a failed check, the same way whatever failed, and counts
// it by reason.
func (a *Adapter) refuse(w http.ResponseWriter, r *http.Request, err error) {
	reason := wxcrypto.Reason(err)
	if errors.Is(err, errUnencrypted) {
		reason = ReasonUnencrypted
	}
	a.m.MessagesRejected.WithLabelValues(Name, reason).Inc()
	a.refusals.Log(r.Context(), a.log, slog.LevelWarn, reason, Name, "callback refused", "reason", reason, "err", err, "remote", r.RemoteAddr)
	wxcrypto.WriteRefusal(w)
}

// verifyURL answers the check WeChat makes when the server URL is saved:
// the echostr as it came, once the signature holds (in every mode).
func (a *Adapter) verifyURL(w http.ResponseWriter, r *http.Request) {
	q, err := wxcrypto.ParseQuery(r.URL.Query())
	if err == nil {
		err = a.crypter.VerifyPlain(q, a.opts.Now(), a.opts.Window)
	}
	if err != nil {
		a.refuse(w, r, err)
		return
	}
	a.log.Info("server URL verified")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(q.EchoStr))
}

// open verifies and reads a callback in the account's mode. encrypted
// reports that the reply must be encrypted too.
func (a *Adapter) open(q wxcrypto.Query, body []byte) (msg wxcrypto.Message, encrypted bool, err error) {
	aes := q.EncryptType == "aes"
	switch {
	case a.crypter.Encrypts() && aes:
		msg, err = a.crypter.OpenMessage(q, body, a.opts.Now(), a.opts.Window)
		return msg, true, err
	case a.crypter.Encrypts() || aes:
		return wxcrypto.Message{}, false, errUnencrypted
	}
	if err := a.crypter.VerifyPlain(q, a.opts.Now(), a.opts.Window); err != nil {
		return wxcrypto.Message{}, false, err
	}
	msg, err = wxcrypto.ParseMessage(body)
	return msg, false, err
}

// callback takes one message: verified before it is read, handed to the
// gateway, and answered with the passive reply if the answer comes in
// time, else empty.
func (a *Adapter) callback(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, err := wxcrypto.ReadBody(w, r, a.opts.BodyTimeout)
	if errors.Is(err, channels.ErrBodyTooLarge) {
		a.m.MessagesRejected.WithLabelValues(Name, ReasonTooLarge).Inc()
		a.refusals.Log(r.Context(), a.log, slog.LevelWarn, ReasonTooLarge, Name, "callback refused", "reason", ReasonTooLarge, "remote", r.RemoteAddr)
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return
	}
	var q wxcrypto.Query
	if err == nil {
		q, err = wxcrypto.ParseQuery(r.URL.Query())
	}
	var msg wxcrypto.Message
	var encrypted bool
	if err == nil {
		msg, encrypted, err = a.open(q, body)
	}
	if err == nil {
		if err = a.replays.Check(r.Context(), q, body); err != nil && !errors.Is(err, wxcrypto.ErrRefused) {
			a.log.Error("could not record the callback; WeChat will retry it", "err", err)
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
	}
	if err != nil {
		a.refuse(w, r, err)
		return
	}
	var text string
	switch msg.MsgType {
	case "event":
		// subscribe, unsubscribe, menu clicks: acked, nothing to answer.
		a.log.Debug("event ignored", "event", msg.Event)
		writeEmpty(w)
		return
	case "text":
		text = msg.Content
	case "voice":
		text = msg.Recognition // set when the account has speech recognition
	}
	text = strings.TrimSpace(text)
	switch {
	case msg.MsgID == "":
		a.m.MessagesRejected.WithLabelValues(Name, wxcrypto.ReasonBadRequest).Inc()
		a.log.Warn("message without MsgId ignored", "type", msg.MsgType)
		writeEmpty(w)
	default:
		// A message without text (an image, a location) is handed over
		// too: the gateway answers it with the note, passively like any
		// answer, if the access rules admit the sender.
		a.converse(w, r, msg, text, encrypted, arrived)
	}
}

// converse hands the message to the gateway and waits, up to PassiveWait
// from the request's arrival, for its answer to serve passively.
func (a *Adapter) converse(w http.ResponseWriter, r *http.Request, msg wxcrypto.Message, text string, encrypted bool, arrived time.Time) {
	ctx := r.Context()
	owner := randomHex(16)
	claim, err := a.passive.claim(ctx, msg.MsgID, owner)
	if err != nil {
		a.log.Error("could not record the callback; WeChat will retry it", "err", err)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	if claim == claimDone {
		writeEmpty(w) // answered already, passively or on its way actively
		return
	}
	m := a.message(msg, text)
	m.Attachments = wxapi.ImageAttachments(msg)
	if text == "" && len(m.Attachments) == 0 {
		m.Unsupported = unsupportedNote
	}
	if err := a.submit(ctx, m); err != nil {
		if aerr := a.passive.abandon(context.WithoutCancel(ctx), msg.MsgID, owner); aerr != nil {
			a.log.Warn("could not drop the claim of an unsubmitted message", "err", aerr)
		}
		a.log.Error("could not hand over a message; WeChat will retry it", "err", err)
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	res, err := a.passive.await(ctx, msg.MsgID, owner, arrived.Add(a.opts.PassiveWait))
	switch {
	case err != nil:
		a.log.Error("waiting for the answer failed; it goes out as a customer-service message", "err", err)
		writeEmpty(w)
	case !res.serve:
		writeEmpty(w)
	case ctx.Err() != nil:
		// WeChat went away after the answer was handed over: it is ours
		// to deliver, the other way.
		user, reply := msg.FromUserName, res.reply
		a.bg.Go(func(ctx context.Context) {
			if err := a.sendCustom(ctx, user, reply, true); err != nil {
				a.log.Error("deliver an answer whose callback went away", "err", err)
			}
		})
	default:
		a.writeReply(w, msg, encrypted, res.reply)
	}
}

// submit hands m to the gateway. A message the gateway has seen (a retry)
// is accepted without a second turn.
func (a *Adapter) submit(ctx context.Context, m channels.Message) error {
	h := a.currentHandler()
	if h == nil {
		a.m.MessagesRejected.WithLabelValues(Name, ReasonUnavailable).Inc()
		return errors.New("wechat_oa: not running yet")
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.SubmitTimeout)
	defer cancel()
	return h.Submit(sctx, m)
}

func (a *Adapter) message(msg wxcrypto.Message, text string) channels.Message {
	return channels.Message{
		ID:        a.cfg.AppID + ":" + msg.MsgID,
		Channel:   Name,
		Account:   a.opts.Account,
		Workspace: a.cfg.AppID,
		Chat:      msg.FromUserName,
		User:      msg.FromUserName,
		Text:      text,
		DM:        true,
		Received:  a.opts.Now(),
		Meta:      map[string]string{MetaMsgID: msg.MsgID},
	}
}

// writeEmpty is the empty passive reply: WeChat shows nothing and does not
// retry.
func writeEmpty(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("success"))
}

// writeReply answers the callback with text, encrypted when the callback
// was.
func (a *Adapter) writeReply(w http.ResponseWriter, msg wxcrypto.Message, encrypted bool, text string) {
	now := a.opts.Now()
	out := wxcrypto.TextReply(msg.FromUserName, msg.ToUserName, now, text)
	if encrypted {
		sealed, err := a.crypter.SealReply(out, now, randomDigits(10))
		if err != nil {
			a.log.Error("encrypt the passive reply", "err", err)
			writeEmpty(w)
			return
		}
		out = sealed
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	_, _ = w.Write(out)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// randomDigits is a nonce as WeChat writes them.
func randomDigits(n int) string {
	var b strings.Builder
	for range n {
		d, _ := rand.Int(rand.Reader, big.NewInt(10))
		b.WriteByte(byte('0' + d.Int64()))
	}
	return b.String()
}
