package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Function names the model can call must match ^[a-zA-Z0-9_-]{1,64}$; MCP
// tool names may also hold dots, slashes and any other character a server
// chooses.
const (
	maxName = 64
	// hashLen hex digits of SHA-256 tell apart names that were cut or
	// that collided once sanitised.
	hashLen = 8
)

var invalidNameRE = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// sanitise replaces every character a function name cannot hold with "_".
func sanitise(s string) string {
	return invalidNameRE.ReplaceAllString(s, "_")
}

// hashed is server__tool cut to leave room for "_" and a short hash of the
// server's own tool name, so it is stable for that tool whatever else the
// server offers.
func hashed(server, tool string) string {
	sum := sha256.Sum256([]byte(tool))
	base := server + "__" + sanitise(tool)
	if limit := maxName - 1 - hashLen; len(base) > limit {
		base = base[:limit]
	}
	return base + "_" + hex.EncodeToString(sum[:])[:hashLen]
}

// offeredNames maps each of a server's tool names to the name the model
// sees: server__tool with invalid characters replaced by "_". A name longer
// than 64 characters is cut and given a short hash of the original; when
// several tools sanitise to the same name, the one that needed no change
// keeps it and the others get the hash. A name that still collides (a tool
// literally named like another's hashed form) is left out and reported in
// dropped. Names are assigned in sorted order, so the result depends only on
// the set of names.
func offeredNames(server string, tools []string) (names map[string]string, dropped []string) {
	tools = slices.Sorted(slices.Values(tools))
	candidate := make(map[string]string, len(tools))
	group := make(map[string][]string, len(tools))
	for _, t := range tools {
		c := server + "__" + sanitise(t)
		if len(c) > maxName {
			c = hashed(server, t)
		}
		candidate[t] = c
		group[c] = append(group[c], t)
	}
	names = make(map[string]string, len(tools))
	used := make(map[string]bool, len(tools))
	for _, t := range tools {
		c := candidate[t]
		if len(group[c]) > 1 && sanitise(t) != t {
			c = hashed(server, t)
		}
		if used[c] {
			dropped = append(dropped, t)
			continue
		}
		used[c] = true
		names[t] = c
	}
	return names, dropped
}

// Class rules that rest on a tool's annotations rather than on a glob.
const (
	ruleHint        = "readOnlyHint"
	ruleTrustedHint = "readOnlyHint, trust_annotations"
	ruleHintFalse   = "readOnlyHint: false"
	ruleNoHint      = "default: no readOnlyHint"
)

// hint is what a tool's annotations say of its class.
type hint int

const (
	hintNone     hint = iota // no annotations
	hintWrites               // annotations without readOnlyHint: true
	hintReadOnly             // readOnlyHint: true
)

// toolHint reads the hint of a's tool. The SDK decodes a readOnlyHint
// missing from annotations as false, and servers built on it send false
// explicitly, so annotations that do not say true are taken to say false.
func toolHint(a *sdk.ToolAnnotations) hint {
	switch {
	case a == nil:
		return hintNone
	case a.ReadOnlyHint:
		return hintReadOnly
	}
	return hintWrites
}

// toolClass is what class decided for one tool.
type toolClass struct {
	writes bool
	// rule names what decided writes.
	rule string
	// readClaimed is true when the tool is read only by its server's
	// readOnlyHint, on a server not marked trust_annotations.
	readClaimed bool
}

// class decides whether a server's tool writes, and names the rule that
// decided: a write glob, then a read glob, then the tool's readOnlyHint;
// anything else writes, the safe default, since a hint is only a hint.
func class(cfg ServerConfig, tool string, h hint) toolClass {
	if g, ok := matchGlob(cfg.Write, tool); ok {
		return toolClass{writes: true, rule: fmt.Sprintf("write %q", g)}
	}
	if g, ok := matchGlob(cfg.Read, tool); ok {
		return toolClass{rule: fmt.Sprintf("read %q", g)}
	}
	switch {
	case h == hintReadOnly && cfg.TrustAnnotations:
		return toolClass{rule: ruleTrustedHint}
	case h == hintReadOnly:
		return toolClass{rule: ruleHint, readClaimed: true}
	case h == hintWrites:
		return toolClass{writes: true, rule: ruleHintFalse}
	}
	return toolClass{writes: true, rule: ruleNoHint}
}

// ClassRules describes for an operator how the server's tools get their
// class, in the order class applies the rules: its write globs, its read
// globs, then each tool's readOnlyHint; anything else writes. It is what
// can be said of a server that cannot be asked for its tools.
func (c ServerConfig) ClassRules() string {
	var parts []string
	quote := func(globs []string) string {
		q := make([]string, len(globs))
		for i, g := range globs {
			q[i] = strconv.Quote(g)
		}
		return strings.Join(q, ", ")
	}
	if len(c.Write) > 0 {
		parts = append(parts, "write "+quote(c.Write))
	}
	if len(c.Read) > 0 {
		parts = append(parts, "read "+quote(c.Read))
	}
	hint := "readOnlyHint: read where writes are allowed"
	if c.TrustAnnotations {
		hint = "readOnlyHint: read (trust_annotations)"
	}
	return strings.Join(append(parts, hint, "otherwise write"), "; ")
}

// offered reports whether a server's tool passes its tools.allow/deny.
func offered(f ToolFilter, tool string) bool {
	if _, ok := matchGlob(f.Deny, tool); ok {
		return false
	}
	if f.Allow == nil {
		return true
	}
	_, ok := matchGlob(f.Allow, tool)
	return ok
}

// matchGlob returns the first glob of globs that matches name.
func matchGlob(globs []string, name string) (string, bool) {
	for _, g := range globs {
		// Validate rejects malformed globs; one that slips through
		// matches only its own text.
		if ok, err := path.Match(g, name); g == name || (err == nil && ok) {
			return g, true
		}
	}
	return "", false
}
