package skills

import (
	"slices"
	"strings"
	"unicode"
)

// Find weights: an exact name always wins, then name terms, tags and the
// description, mirroring how deliberately each was written.
const (
	scoreExactName  = 10000
	weightNameTerm  = 12
	weightTagTerm   = 6
	weightDescTerm  = 2
	minPrefixLength = 4 // shortest token a prefix match may use
)

// stopWords are dropped from English queries and texts; "use" and "when"
// open most descriptions and would match everything.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true,
	"be": true, "by": true, "can": true, "do": true, "for": true, "from": true,
	"how": true, "i": true, "if": true, "in": true, "is": true, "it": true,
	"me": true, "my": true, "of": true, "on": true, "or": true, "please": true,
	"so": true, "that": true, "the": true, "this": true, "to": true,
	"use": true, "used": true, "using": true, "when": true, "with": true,
	"you": true, "your": true,
	"的": true, "了": true, "和": true, "是": true, "在": true,
}

// Find ranks the visible (nil means all), model-invocable skills against
// query and returns at most limit of them (limit <= 0: all), best first,
// ties broken by name. Skills scoring zero are not returned.
func (c *Catalog) Find(query string, visible func(*Skill) bool, limit int) []*Skill {
	q := strings.ToLower(strings.TrimSpace(query))
	terms := uniqueTokens(q)
	type hit struct {
		s     *Skill
		score int
	}
	var hits []hit
	for _, s := range c.sorted {
		if s.DisableModelInvocation || (visible != nil && !visible(s)) {
			continue
		}
		score := 0
		if q == s.Name || strings.ReplaceAll(q, " ", "-") == s.Name {
			score += scoreExactName
		}
		name := tokenSet(s.Name)
		tags := tokenSet(strings.Join(s.Tags, " "))
		desc := tokenSet(s.Description)
		for _, t := range terms {
			score += matchScore(t, name, weightNameTerm) +
				matchScore(t, tags, weightTagTerm) +
				matchScore(t, desc, weightDescTerm)
		}
		if score > 0 {
			hits = append(hits, hit{s, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if a.score != b.score {
			return b.score - a.score
		}
		return strings.Compare(a.s.Name, b.s.Name)
	})
	if limit > 0 && len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]*Skill, len(hits))
	for i, h := range hits {
		out[i] = h.s
	}
	return out
}

// matchScore gives full weight for an exact token and half for a prefix
// match between longer words ("deploy" ~ "deployment").
func matchScore(term string, set map[string]bool, weight int) int {
	if set[term] {
		return weight
	}
	if len(term) < minPrefixLength || isCJK(term) {
		return 0
	}
	for tok := range set {
		if len(tok) >= minPrefixLength && (strings.HasPrefix(tok, term) || strings.HasPrefix(term, tok)) {
			return weight / 2
		}
	}
	return 0
}

func isCJK(s string) bool {
	for _, r := range s {
		return cjkRune(r)
	}
	return false
}

// cjkRune reports scripts written without spaces between words: Chinese,
// Japanese kana, and Korean (whose particles attach to the word).
func cjkRune(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// foldWidth maps full-width ASCII (ｄｅｐｌｏｙ, typed with a CJK input
// method) and the ideographic space to their plain forms.
func foldWidth(r rune) rune {
	switch {
	case r >= 0xFF01 && r <= 0xFF5E:
		return r - 0xFEE0
	case r == 0x3000:
		return ' '
	}
	return r
}

func tokenSet(s string) map[string]bool {
	set := map[string]bool{}
	for _, t := range tokenize(s) {
		set[t] = true
	}
	return set
}

func uniqueTokens(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range tokenize(s) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// tokenize lower-cases s, folds full-width forms and splits it on anything
// that is not a letter or digit. Runs of CJK characters have no spaces
// between words, so instead of segmenting them it emits every single
// character plus every 2- and 3-character window ("代码审查" → 代, 码, …,
// 代码, 码审, 审查, 代码审, 码审查; "デプロイ" → …, デプ, プロ, ロイ, …).
func tokenize(s string) []string {
	var out []string
	var word []rune
	var han []rune
	flushWord := func() {
		if len(word) > 0 {
			if w := string(word); !stopWords[w] {
				out = append(out, w)
			}
			word = word[:0]
		}
	}
	flushHan := func() {
		for n := 1; n <= 3; n++ {
			for i := 0; i+n <= len(han); i++ {
				if w := string(han[i : i+n]); !stopWords[w] {
					out = append(out, w)
				}
			}
		}
		han = han[:0]
	}
	for _, r := range strings.ToLower(strings.Map(foldWidth, s)) {
		switch {
		case cjkRune(r):
			flushWord()
			han = append(han, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushHan()
			word = append(word, r)
		default:
			flushWord()
			flushHan()
		}
	}
	flushWord()
	flushHan()
	return out
}
