// Package ident checks short identifiers made of a set of ASCII bytes
// (approval ids, resource keys, user ids, names) without a regular
// expression. A bounded repetition such as [A-Za-z0-9]{1,64} compiles to a
// program with an instruction per repetition: about 50 KB of heap in 700
// allocations for {1,64} and 240 KB for {1,256}, built at start-up and kept
// for the life of the process, where a loop over the bytes needs nothing.
package ident

// Set is a set of ASCII bytes, one bit each.
type Set [2]uint64

// Of returns the set of the bytes in spec, written as inside a regular
// expression's brackets: ranges like "a-z" and single bytes; a '-' first
// or last stands for itself. It panics on a byte that is not ASCII, a
// programming error.
func Of(spec string) Set {
	var s Set
	for i := 0; i < len(spec); i++ {
		lo, hi := spec[i], spec[i]
		if i+2 < len(spec) && spec[i+1] == '-' {
			hi = spec[i+2]
			i += 2
		}
		if hi >= 0x80 || lo > hi {
			panic("ident: bad set " + spec)
		}
		for b := lo; ; b++ {
			s[b/64] |= 1 << (b % 64)
			if b == hi {
				break
			}
		}
	}
	return s
}

// Has reports whether b is in s.
func (s Set) Has(b byte) bool { return b < 0x80 && s[b/64]&(1<<(b%64)) != 0 }

// Match reports whether str is min to max bytes long, each in s: what
// ^[s]{min,max}$ matches.
func (s Set) Match(str string, min, max int) bool {
	if len(str) < min || len(str) > max {
		return false
	}
	for i := 0; i < len(str); i++ {
		if !s.Has(str[i]) {
			return false
		}
	}
	return true
}

// nameFirst and nameRest are the bytes of a name written in configuration.
var nameFirst, nameRest = Of("a-z0-9"), Of("a-z0-9_-")

// Name reports whether s is 1 to max bytes of lower-case letters, digits,
// '-' and '_', led by a letter or a digit: the names operators give
// accounts, triggers and apps, which go into URL paths, metric labels and
// Redis keys. What ^[a-z0-9][a-z0-9_-]{0,max-1}$ matches.
func Name(s string, max int) bool { return Led(s, nameFirst, nameRest, 0, max-1) }

// Led reports whether str is a byte of first followed by min to max bytes
// of rest: what ^[first][rest]{min,max}$ matches.
func Led(str string, first, rest Set, min, max int) bool {
	return len(str) > 0 && first.Has(str[0]) && rest.Match(str[1:], min, max)
}
