package question

import (
	"fmt"
	"strings"

	"github.com/parleyhq/parley/gateway/approval"
)

// How explains what to type to answer f, in Markdown: the fields with
// their kinds and choices, then how to decline or cancel. Every word from
// the server is made inert (no mention, no markup).
func (f Form) How() string {
	var b strings.Builder
	switch len(f.Fields) {
	case 0:
		b.WriteString("Reply `yes` to go ahead.")
	case 1:
		fd := f.Fields[0]
		fmt.Fprintf(&b, "Reply in this thread with %s.", fd.kind())
	default:
		b.WriteString("Reply in this thread with one line per field, `name: value`:")
		for _, fd := range f.Fields {
			fmt.Fprintf(&b, "\n• `%s`", fd.Name)
			if fd.Title != "" {
				b.WriteString(" (" + approval.Inert(fd.Title) + ")")
			}
			b.WriteString(": " + fd.kind())
			if fd.Required {
				b.WriteString(", required")
			}
		}
	}
	if d := f.describe(); d != "" {
		b.WriteString("\n" + d)
	}
	b.WriteString("\nOr reply `/decline` to say no.")
	return b.String()
}

// describe is the one field's description, when it has one.
func (f Form) describe() string {
	if len(f.Fields) != 1 || f.Fields[0].Description == "" {
		return ""
	}
	return "_" + approval.Inert(f.Fields[0].Description) + "_"
}

// kind says what a field takes.
func (fd Field) kind() string {
	switch fd.Type {
	case TypeBoolean:
		return "yes or no"
	case TypeNumber:
		return "a number" + fd.span()
	case TypeInteger:
		return "a whole number" + fd.span()
	case TypeEnum, TypeMulti:
		var labels []string
		for i, c := range fd.Choices {
			labels = append(labels, fmt.Sprintf("%d. %s", i+1, approval.Inert(c.Label)))
		}
		lead := "one of"
		if fd.Type == TypeMulti {
			lead = "one or more (separated by commas) of"
		}
		return lead + " " + strings.Join(labels, ", ")
	}
	if fd.Format != "" {
		return "a " + fd.Format
	}
	return "your answer"
}

func (fd Field) span() string {
	if fd.Minimum == nil && fd.Maximum == nil {
		return ""
	}
	return " from " + bound(fd.Minimum, "-∞") + " to " + bound(fd.Maximum, "∞")
}
