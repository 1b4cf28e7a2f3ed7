package feishu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/internal/ident"
)

// Card actions: a click on a prompt card's button.
//
// Feishu delivers card.action.trigger like an event (same envelope, token,
// encryption and signature over HTTP; an event frame on the long
// connection) but waits for the answer: within 3 s, a toast for the one
// who clicked and, optionally, the card to show instead. So a click is
// decided while Feishu waits: it becomes the message "/approve CODE" or
// "/deny CODE" from the clicking user in the conversation the card was
// sent to, submitted like any message; the gateway decides it in Submit
// and answers it through Send at once, and Send, seeing the click's mark
// in Meta, hands that answer back to the waiting callback rather than
// posting it. A decision redraws the card for everyone; anything else
// (someone who may not approve, a code that is not pending) is a toast for
// the clicker alone, the card unchanged. A click whose answer does not
// come while Feishu waits changes nothing on the card here; the
// decision's own answer redraws it whenever it comes.

// EventCardAction is the callback type of a card button click.
const EventCardAction = "card.action.trigger"

// MetaCardAction marks the message a click became: the key under which
// the waiting callback collects the gateway's answer.
const MetaCardAction = "card_action"

// ReasonBadCardAction counts clicks refused before they reach the gateway
// (not a button of a prompt card, a value that does not match the chat).
const ReasonBadCardAction = "bad_card_action"

// maxValueLen bounds every string of a button's value.
const maxValueLen = 128

// isApprovalID says whether id has the shape of the approval ids put in
// buttons, 1–64 letters and digits: nothing else becomes a command's
// argument.
func isApprovalID(id string) bool { return alnum.Match(id, 1, 64) }

var alnum = ident.Of("A-Za-z0-9")

// cardActionEvent is the part of card.action.trigger read here.
type cardActionEvent struct {
	Header *struct {
		EventID   string `json:"event_id"`
		EventType string `json:"event_type"`
		TenantKey string `json:"tenant_key"`
	} `json:"header"`
	Event *struct {
		Operator *struct {
			OpenID    string `json:"open_id"`
			TenantKey string `json:"tenant_key"`
		} `json:"operator"`
		Action *struct {
			Tag   string          `json:"tag"`
			Value json.RawMessage `json:"value"`
		} `json:"action"`
		Context *struct {
			OpenMessageID string `json:"open_message_id"`
			OpenChatID    string `json:"open_chat_id"`
		} `json:"context"`
	} `json:"event"`
}

// cardResponse is the answer to a click: a toast, and the card to show.
type cardResponse struct {
	Toast *cardToast `json:"toast,omitempty"`
	Card  *cardRaw   `json:"card,omitempty"`
}

type cardToast struct {
	Type    string `json:"type"` // info, success, error, warning
	Content string `json:"content"`
}

type cardRaw struct {
	Type string         `json:"type"` // raw
	Data map[string]any `json:"data"`
}

// actionSlot collects what the gateway answers a click while Feishu waits.
type actionSlot struct {
	mu      sync.Mutex
	replies []channels.Reply
}

// isCardAction reports whether a plaintext callback is a card click.
func isCardAction(plain []byte) bool {
	var env struct {
		Header *struct {
			EventType string `json:"event_type"`
		} `json:"header"`
	}
	return json.Unmarshal(plain, &env) == nil && env.Header != nil && env.Header.EventType == EventCardAction
}

// clickMessage turns a verified click into the message it stands for; ok
// is false for anything that is not a click on a prompt card's button.
func clickMessage(plain []byte) (m channels.Message, id string, ok bool) {
	var ev cardActionEvent
	if json.Unmarshal(plain, &ev) != nil || ev.Header == nil || ev.Event == nil {
		return m, "", false
	}
	e := ev.Event
	if ev.Header.EventType != EventCardAction || e.Operator == nil || e.Action == nil || e.Context == nil || e.Action.Tag != "button" {
		return m, "", false
	}
	var v map[string]string
	if json.Unmarshal(e.Action.Value, &v) != nil {
		return m, "", false
	}
	for _, s := range v {
		if len(s) > maxValueLen {
			return m, "", false
		}
	}
	user, chat, msgID := e.Operator.OpenID, e.Context.OpenChatID, e.Context.OpenMessageID
	id = v[valueApproval]
	var text string
	switch v[valueDecision] {
	case decisionApprove:
		text = "/approve " + id
	case decisionDeny:
		text = "/deny " + id
	default:
		if text, id, ok = questionClick(v); !ok {
			return m, "", false
		}
	}
	// The card must be clicked where it was sent: a forwarded card (or a
	// value naming another chat) is not a decision here.
	if !isApprovalID(id) || user == "" || chat == "" || msgID == "" || v[valueChat] != chat ||
		len(user) > maxValueLen || len(chat) > maxValueLen || len(msgID) > maxValueLen || ev.Header.EventID == "" {
		return m, "", false
	}
	tenant := ev.Header.TenantKey
	if tenant == "" {
		tenant = e.Operator.TenantKey
	}
	dm := v[valueDM] == "1"
	m = channels.Message{
		// No ID: a second delivery of a click (on another replica, or a
		// double click) is answered with what happened, not dropped; the
		// gateway's atomic decision counts one.
		Channel:   Name,
		Workspace: tenant,
		Chat:      chat,
		Thread:    v[valueThread],
		User:      user,
		DM:        dm,
		Text:      text,
		Received:  time.Now(),
		Meta:      map[string]string{MetaMessageID: msgID, MetaEventID: ev.Header.EventID},
	}
	if dm {
		m.Thread = ""
		m.Meta[MetaChatType] = "p2p"
	} else {
		m.Meta[MetaThreadKey] = chat + ":" + m.Thread
	}
	return m, id, true
}

// serveCardAction answers a verified click over the HTTP callback.
func (a *Adapter) serveCardAction(w http.ResponseWriter, r *http.Request, plain []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), a.opts.SubmitTimeout)
	defer cancel()
	body, err := a.cardAction(ctx, plain)
	switch {
	case errors.Is(err, errNoHandler):
		a.reject(w, ReasonUnavailable, http.StatusServiceUnavailable, "not ready")
		return
	case err != nil:
		// Feishu shows the clicker its own error; nothing changed.
		a.log.Error("card action not accepted", "err", err)
		http.Error(w, "temporarily unavailable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// cardAction decides one verified click and returns the JSON answer for
// Feishu. err is errNoHandler before Run, or the gateway's failure to
// take the message (Feishu then shows its own error; nothing changed).
func (a *Adapter) cardAction(ctx context.Context, plain []byte) ([]byte, error) {
	h := a.currentHandler()
	if h == nil {
		return nil, errNoHandler
	}
	m, id, ok := clickMessage(plain)
	if !ok {
		a.m.MessagesRejected.WithLabelValues(Name, ReasonBadCardAction).Inc()
		a.refusals.Log(ctx, a.log, slog.LevelWarn, ReasonBadCardAction, Name, "card action refused", "reason", ReasonBadCardAction)
		return []byte("{}"), nil
	}
	m.Account = a.opts.Account
	key := randomKey()
	slot := &actionSlot{}
	a.actions.Store(key, slot)
	defer a.actions.Delete(key)
	m.Meta[MetaCardAction] = key
	if err := h.Submit(ctx, m); err != nil {
		return nil, err
	}
	slot.mu.Lock()
	replies := append([]channels.Reply(nil), slot.replies...)
	slot.mu.Unlock()
	return json.Marshal(clickResponse(id, replies))
}

// clickResponse builds the answer to a click from the gateway's replies to
// it: a final decision redraws the card; a refusal is a toast for the one
// who clicked; nothing at all when the gateway gave no answer (someone the
// access rules keep out).
func clickResponse(approvalID string, replies []channels.Reply) cardResponse {
	var resp cardResponse
	for _, r := range replies {
		kind := "info"
		d := r.Decided
		switch {
		case d != nil && d.Final() && d.ID == approvalID:
			resp.Card = &cardRaw{Type: "raw", Data: decidedCard(d)}
			if !d.Already {
				kind = "success"
			}
		case d != nil && d.Outcome == channels.DecisionNotAllowed, r.Failed:
			kind = "error"
		}
		if r.Text != "" {
			resp.Toast = &cardToast{Type: kind, Content: toastText(r.Text)}
		}
	}
	return resp
}

// toastText keeps a toast short: its first line, at most 200 characters.
func toastText(s string) string {
	for i, c := range s {
		if c == '\n' {
			s = s[:i]
			break
		}
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}

// clickReply takes the gateway's answer to a click's message (true): it
// goes to the waiting callback while it waits. Later, a final decision
// still redraws the card; other late answers go nowhere, since the one
// who clicked waits for a toast, not a message.
func (a *Adapter) clickReply(ctx context.Context, m channels.Message, r channels.Reply) bool {
	key := m.Meta[MetaCardAction]
	if key == "" {
		return false
	}
	if v, ok := a.actions.Load(key); ok {
		slot := v.(*actionSlot)
		slot.mu.Lock()
		slot.replies = append(slot.replies, r)
		slot.mu.Unlock()
		return true
	}
	if r.Decided != nil {
		a.drawDecision(ctx, r.Decided)
	}
	return true
}

func randomKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
