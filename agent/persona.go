package agent

// The system prompt of a turn: the configured (or a profile's) prompt,
// the rule about tool results, and the skill index, in that order. It is
// built from its inputs alone, so turns that share them send the same
// bytes and the provider's prompt cache keeps working.

import "strings"

// Persona is what a profile makes of the system prompt: a prompt that
// replaces Config.SystemPrompt, or a paragraph appended to it. The zero
// value leaves Config.SystemPrompt alone.
type Persona struct {
	// Name is the profile's name. It keys the cache of the encoded
	// system message, so that conversations of different profiles do not
	// evict each other's; "" is no profile.
	Name string
	// Prompt, when set, replaces Config.SystemPrompt.
	Prompt string
	// Append, when set, follows the prompt as a paragraph of its own.
	Append string
}

// buildSystemPrompt is the system prompt of base (Config.SystemPrompt),
// made over by p, with the tool-result rule and extra (the skill index).
func buildSystemPrompt(base string, p Persona, extra string) string {
	if p.Prompt != "" {
		base = p.Prompt
	}
	var b strings.Builder
	b.WriteString(strings.TrimSpace(base))
	if add := strings.TrimSpace(p.Append); add != "" {
		b.WriteString("\n\n")
		b.WriteString(add)
	}
	b.WriteString("\n\n")
	b.WriteString(boundaryParagraph)
	if extra = strings.TrimSpace(extra); extra != "" {
		b.WriteString("\n\n")
		b.WriteString(extra)
	}
	return b.String()
}
