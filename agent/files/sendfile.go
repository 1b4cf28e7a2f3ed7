package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/parleyhq/parley/agent"
)

// SendFileName is the builtin tool's name.
const SendFileName = "send_file"

// maxCaption bounds a file's caption, in characters.
const maxCaption = 1000

// SendFile is the builtin tool send_file: it marks a kept file (or a
// chart it draws and keeps) to go out with the answer, in the answer's
// thread, once. It is of the class send: it changes nothing outside the
// chat, and files.send decides where it is offered.
type SendFile struct{}

var (
	_ agent.Tool   = SendFile{}
	_ agent.Sender = SendFile{}
)

func (SendFile) Name() string { return SendFileName }

func (SendFile) Description() string {
	return "Send the user a file or image a tool made (by its id, e.g. att_1, as the tool result names it) with your answer, " +
		"or draw a chart and send it: pass chart instead of id, e.g. {\"chart\": {\"type\": \"line\", \"title\": \"Error rate, last hour\", " +
		"\"series\": [{\"name\": \"5xx\", \"points\": [[1767225600, 0.2], [1767225660, 0.4]]}]}} (t is a Unix time, a number or a label). " +
		"The file goes out after your answer; say it is attached, not that it was sent."
}

// sendFileParams is SendFile's schema, made once: a conversion in
// Parameters would copy it for every request.
var sendFileParams = json.RawMessage(`{"type":"object","properties":{` +
	`"id":{"type":"string","description":"the id of a file a tool made, e.g. att_1"},` +
	`"caption":{"type":"string","description":"a short text shown with the file"},` +
	`"chart":{"type":"object","description":"a chart to draw instead of a file: type line or bar, title, series of {name, points: [[t, v]…]}",` +
	`"properties":{"type":{"type":"string","enum":["line","bar"]},"title":{"type":"string"},` +
	`"series":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"points":{"type":"array","items":{"type":"array"}}}}}}}}}`)

func (SendFile) Parameters() json.RawMessage { return sendFileParams }

func (SendFile) Writes() bool { return false }
func (SendFile) Sends() bool  { return true }

type sendArgs struct {
	ID      string     `json:"id"`
	Caption string     `json:"caption"`
	Chart   *ChartSpec `json:"chart"`
}

// Call implements agent.Tool.
func (SendFile) Call(ctx context.Context, tc *agent.TurnContext, raw json.RawMessage) (agent.Result, error) {
	keeper := tc.Files()
	if keeper == nil {
		return agent.Result{}, errors.New("this conversation sends no files")
	}
	var args sendArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return agent.Result{}, fmt.Errorf("invalid arguments: %s", firstLine(err.Error()))
	}
	args.Caption = strings.TrimSpace(args.Caption)
	if utf8.RuneCountInString(args.Caption) > maxCaption {
		return agent.Result{}, fmt.Errorf("the caption is over %d characters", maxCaption)
	}
	var kept agent.KeptFile
	switch {
	case args.Chart != nil && args.ID != "":
		return agent.Result{}, errors.New("pass either id or chart, not both")
	case args.Chart != nil:
		png, err := Render(*args.Chart)
		if err != nil {
			return agent.Result{}, err
		}
		k, line := tc.KeepFile(ctx, SendFileName, agent.File{Name: chartName(args.Chart.Title), Type: "image/png", Data: png})
		if k.ID == "" {
			return agent.Result{}, errors.New("the chart was drawn but not kept: " + line)
		}
		kept = k
	case args.ID == "":
		return agent.Result{}, errors.New("pass the id of a file a tool made (e.g. att_1), or a chart")
	default:
		k, err := keeper.Info(ctx, tc.Conversation, args.ID)
		if err != nil {
			return agent.Result{}, fmt.Errorf("no file %q in this conversation (it may have expired); use an id a tool result named", cutID(args.ID))
		}
		kept = k
	}
	return agent.Result{
		Content: agent.DescribeFile(kept) + " will be sent with your answer, after it. Say it is attached; do not say it has been sent.",
		Send:    []agent.Outgoing{{ID: kept.ID, Caption: args.Caption}},
	}, nil
}

// chartName is a chart's file name, from its title.
func chartName(title string) string {
	if strings.TrimSpace(title) == "" {
		return "chart.png"
	}
	return title + ".png"
}

// cutID keeps a model's wrong id short in the answer.
func cutID(id string) string {
	if len(id) > 40 {
		return id[:40] + "…"
	}
	return id
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
