package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/parleyhq/parley/agent"
	"github.com/parleyhq/parley/channels"
	"github.com/parleyhq/parley/gateway/approval"
	"github.com/parleyhq/parley/gateway/delivery"
	"github.com/parleyhq/parley/gateway/question"
	"github.com/parleyhq/parley/internal/pausable"
	"github.com/parleyhq/parley/sessions"
)

// A tool's server may ask the person whose message led to the call for
// something it needs (MCP elicitation). The server waits for the answer
// on the session the call runs on, so the turn waits for it where it
// runs, holding the conversation's lock: the question is posted in the
// conversation, the person's next message there (typed, or a click on one
// of its buttons, reaching any replica) is handed to this turn by the
// store's Accept (sessions.Asker), and it is read against the requested
// schema. Nobody else can answer it, and it expires.

// Question is what a tool's server asks.
type Question struct {
	// From names the server; Message is what it asks (its words).
	From, Message string
	// Schema is the requested schema of the answer (a flat JSON object
	// schema); empty for a plain confirmation.
	Schema json.RawMessage
	// URL, when set, is a page the person is to open (URL mode).
	URL string
}

// Answer actions, as MCP names them.
const (
	AnswerAccept  = "accept"
	AnswerDecline = channels.AnswerDecline
	AnswerCancel  = channels.AnswerCancel
)

// Answer is what became of a question.
type Answer struct {
	Action  string
	Content map[string]any
}

// maxQuestionWait bounds how long a turn waits for an answer: it holds a
// worker and the conversation meanwhile. Within it, the chat's approval
// timeout is the question's.
const maxQuestionWait = 15 * time.Minute

// answerPoll is how often a waiting turn looks for its answer.
const answerPoll = 200 * time.Millisecond

// askingTurn is the turn a tool call runs in, as Ask needs it.
type askingTurn struct {
	conv    string
	m       channels.Message
	rt      delivery.Route
	timeout time.Duration
	// events is the turn's live reply's listener (nil without one), which
	// a tool's progress is shown through.
	events func(agent.Event)
}

type askingKey struct{}

// withAskingTurn gives the turn's tool calls what Ask needs to reach the
// person whose message the turn answers.
func withAskingTurn(ctx context.Context, t askingTurn) context.Context {
	return context.WithValue(ctx, askingKey{}, t)
}

// Ask puts q to the person whose message led to the tool call ctx belongs
// to, and waits for their answer. A call that is not part of a turn with
// a person to ask (a conversation on the console, which waits for each
// reply, or no turn at all), or a question Parley cannot show, is
// declined at once.
func (g *Gateway) Ask(ctx context.Context, q Question) (Answer, error) {
	t, ok := ctx.Value(askingKey{}).(askingTurn)
	asker, hasAsker := g.store.(sessions.Asker)
	if !ok || !hasAsker || g.capsOf(t.m).Awaited != nil || t.m.User == "" {
		return Answer{Action: AnswerDecline}, nil
	}
	form, err := question.Parse(q.Schema)
	if err == nil && q.URL != "" && !safeURL(q.URL) {
		err = errors.New("a link that is not a plain http(s) address")
	}
	if err != nil {
		g.log.WarnContext(ctx, "a tool's server asked what Parley cannot ask; declined", "server", q.From, "err", err)
		return Answer{Action: AnswerDecline}, nil
	}
	wait := min(t.timeout, maxQuestionWait)
	if wait <= 0 {
		wait = maxQuestionWait
	}
	if err := asker.Ask(ctx, t.conv, t.m.User, wait); err != nil {
		g.redisFailed()
		return Answer{Action: AnswerCancel}, fmt.Errorf("gateway: ask: %w", err)
	}
	defer func() {
		if err := asker.EndAsk(context.WithoutCancel(ctx), t.conv); err != nil {
			g.log.WarnContext(ctx, "end a question; it ends with its time", "err", err)
		}
	}()
	id := rand.Text()[:12]
	t.rt.Send(ctx, channels.Reply{Notice: true, Text: questionText(q, form, t.m, wait), Question: &channels.Question{
		ID: id, From: approval.Inert(q.From), Message: approval.Inert(q.Message), URL: q.URL, Choices: buttons(form),
	}})
	// The turn's and the call's clocks stop while the person thinks: the
	// question's own wait bounds it.
	resume := pausable.Pause(ctx)
	defer resume()
	return g.awaitAnswer(ctx, asker, t, form, id, time.Now().Add(wait))
}

// awaitAnswer takes what the person sends until it is an answer, the
// question expires or ctx ends.
func (g *Gateway) awaitAnswer(ctx context.Context, asker sessions.Asker, t askingTurn, form question.Form, id string, deadline time.Time) (Answer, error) {
	tick := time.NewTicker(answerPoll)
	defer tick.Stop()
	for {
		item, ok, err := asker.TakeAnswer(ctx, t.conv)
		if err != nil {
			g.log.WarnContext(ctx, "take an answer; looking again", "err", err)
		}
		if ok {
			if a, done := g.readAnswer(ctx, t, form, id, item); done {
				return a, nil
			}
			continue
		}
		if time.Now().After(deadline) {
			t.rt.Send(ctx, channels.Reply{Notice: true, Text: "Nobody answered the question in time, so I went on without an answer."})
			return Answer{Action: AnswerCancel}, nil
		}
		select {
		case <-ctx.Done():
			return Answer{Action: AnswerCancel}, ctx.Err()
		case <-tick.C:
		}
	}
}

// readAnswer reads one message of the person's; done is false when it is
// no answer to this question (they are told why and asked again).
func (g *Gateway) readAnswer(ctx context.Context, t askingTurn, form question.Form, id string, item []byte) (Answer, bool) {
	var q queued
	if err := json.Unmarshal(item, &q); err != nil {
		return Answer{}, false
	}
	text := strings.TrimSpace(q.Msg.Text)
	if rest, ok := strings.CutPrefix(text, channels.AnswerCommand+" "); ok {
		clicked, choice, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if clicked != id {
			g.route(q.Msg).Send(ctx, channels.Reply{Notice: true, Text: "That question is closed."})
			return Answer{}, false
		}
		text = "/" + strings.TrimSpace(choice)
		if c := strings.TrimSpace(choice); c != AnswerDecline && c != AnswerCancel {
			text = c
		}
	}
	switch strings.ToLower(text) {
	case "/" + AnswerDecline:
		t.rt.Send(ctx, channels.Reply{Notice: true, Text: "Declined."})
		return Answer{Action: AnswerDecline}, true
	case "/" + AnswerCancel: // a click only: a typed /cancel is an approval's
		t.rt.Send(ctx, channels.Reply{Notice: true, Text: "Cancelled."})
		return Answer{Action: AnswerCancel}, true
	}
	if len(form.Fields) == 0 {
		text = confirmation(text)
	}
	content, err := form.Read(text)
	if err == nil && len(form.Fields) == 0 && text != "yes" {
		err = fmt.Errorf("%w: reply yes to go ahead", question.ErrAnswer)
	}
	if err != nil {
		if !errors.Is(err, question.ErrAnswer) {
			err = question.ErrAnswer
		}
		t.rt.Send(ctx, channels.Reply{Notice: true, Text: approval.Inert(err.Error()) + ". Please answer again, or reply `/decline`."})
		return Answer{}, false
	}
	return Answer{Action: AnswerAccept, Content: content}, true
}

// confirmation reads the ways of saying yes to a question of no fields.
func confirmation(text string) string {
	switch strings.ToLower(strings.TrimSuffix(text, ".")) {
	case "yes", "y", "ok", "done", "true":
		return "yes"
	}
	return text
}

// questionText is the question as text: who asks what, what to type,
// who may answer and for how long.
func questionText(q Question, form question.Form, m channels.Message, wait time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s asks:** %s\n", approval.Inert(q.From), approval.Inert(q.Message))
	if q.URL != "" {
		fmt.Fprintf(&b, "Open %s then reply `done`.\n", q.URL)
	} else {
		b.WriteString(form.How() + "\n")
	}
	who := m.UserName
	if who == "" {
		who = m.User
	}
	fmt.Fprintf(&b, "_Only %s can answer; the question closes in %s._", approval.Inert(who), wait.Round(time.Second))
	return b.String()
}

// buttons are the form's choices as a question's buttons.
func buttons(form question.Form) []channels.Choice {
	var out []channels.Choice
	for _, c := range form.Choices() {
		if !channels.IsAnswerValue(c.Value) {
			return nil // a value that cannot go in a button: typed instead
		}
		out = append(out, channels.Choice{Value: c.Value, Label: approval.Inert(c.Label)})
	}
	return out
}

// safeURL reports a plain http(s) address with a host, and nothing in it
// that could end a link or start markup where it is shown.
func safeURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(s) > 2048 {
		return false
	}
	return !strings.ContainsAny(s, " \t\n<>`|*_~\"'")
}

// answered finishes, on arrival, a message that is an answer to a
// question: the waiting turn answers it, so a platform that holds the
// sender's request open for a reply is answered now.
func (g *Gateway) answered(ctx context.Context, m channels.Message) {
	if u := g.capsOf(m).Unanswered; u != nil {
		u.LeftUnanswered(ctx, m)
	}
}

// ShowProgress shows how far a tool call of ctx's turn has come ("running
// TOOL… 2/3") in the turn's live status, at the platform's pace (the live
// reply keeps only the newest of what waits). Tool is the offered name;
// the server's own words are not shown. A call outside a turn with a live
// reply shows nothing.
func (g *Gateway) ShowProgress(ctx context.Context, tool string, progress, total float64) {
	t, ok := ctx.Value(askingKey{}).(askingTurn)
	if !ok || t.events == nil {
		return
	}
	name := tool
	switch {
	case total == 100:
		name += fmt.Sprintf(" %g%%", progress)
	case total > 0:
		name += fmt.Sprintf(" %g/%g", progress, total)
	case progress > 0:
		name += fmt.Sprintf(" %g", progress)
	}
	t.events(agent.Event{Kind: agent.EventTool, Name: name})
}
