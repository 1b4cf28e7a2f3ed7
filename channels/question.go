package channels

import (
	"strings"
)

// # Questions from a tool's server
//
// A tool's server may ask the person whose message led to the call for
// something it needs (MCP elicitation): a confirmation, a choice, a value.
// The gateway shows it with a Reply whose Question is set; its Text is the
// question as text, with what to type, so that every platform can show
// it. An adapter whose platform has buttons may show one for each choice
// of a question that has one field with fixed choices (a yes/no, an
// enum), plus Decline and Cancel, instead of what to type.
//
// A click, as for approvals, is not an answer the adapter decides: once
// the click's request is verified as the platform's, the adapter submits
// it as the message AnswerCommand+" ID CHOICE" (or " ID decline", " ID
// cancel") from the person who clicked, in the conversation the question
// belongs to, with ID empty. The gateway takes it as an answer only from
// the person asked, while the question is open.

// AnswerCommand is the command a click on a question's button is
// submitted as.
const AnswerCommand = "/answer"

// Words for the answers that are not a value.
const (
	AnswerDecline = "decline"
	AnswerCancel  = "cancel"
)

// Question is what a tool's server asks the person.
type Question struct {
	// ID names the question in a button's value.
	ID string
	// From names who asks (the tool's server), Message what it asks; both
	// are the server's words, escaped so that nothing in them is a mention
	// or markup.
	From, Message string
	// Choices, when set, are the values of the question's one field with
	// fixed choices: an adapter with buttons shows one for each (with its
	// Label), and a click answers Value.
	Choices []Choice `json:",omitempty"`
	// URL, when set, is a page the person is to open (a sign-in, a
	// payment): shown as a link, never fetched by Parley.
	URL string `json:",omitempty"`
}

// Choice is one button of a question.
type Choice struct {
	Value, Label string
}

// IsAnswerValue reports whether s may be a question's id or a choice's
// value in a button: short and plain, so that a forged click cannot smuggle
// markup or a second command into the message it becomes.
func IsAnswerValue(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("<>`&@*_~|\\", r) {
			return false
		}
	}
	return true
}

// AnswerText is the message a click on choice (a Choice's Value,
// AnswerDecline or AnswerCancel) of question id is submitted as.
func AnswerText(id, choice string) string {
	return AnswerCommand + " " + id + " " + choice
}
