package channels

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/parleyhq/parley/config"
	"github.com/parleyhq/parley/internal/ident"
)

// validAccountName reports whether name may name an account: it is part
// of its routes, so 1 to 32 lower-case letters, digits, '-' and '_', led
// by a letter or a digit.
func validAccountName(name string) bool { return ident.Name(name, 32) }

// Credential is one of an account's credentials, by its key.
type Credential struct{ Key, Value string }

// Accounts is a platform section's apps, for ValidateAccounts: each by
// name (the section's own keys under DefaultAccount).
type Accounts[C any] struct {
	// ByName is every configured account.
	ByName map[string]C
	// DeclaredDefault: the file also names an account DefaultAccount
	// under accounts:, which the section's own keys already are.
	DeclaredDefault bool
	// Route is the section's first route, of which an account's is
	// Route/NAME.
	Route string
	// Validate checks one account (not the default, which the section
	// checks itself); Credentials lists what must differ between apps.
	Validate    func(C) error
	Credentials func(C) []Credential
}

// ValidateAccounts checks every account under its key (accounts.NAME),
// and refuses a name that cannot be a route, an account named like the
// section's own, and two accounts holding the same app's credentials
// (the platform would deliver its events to one of them, and both would
// answer as the same bot).
func ValidateAccounts[C any](a Accounts[C]) error {
	var errs []error
	seen := map[string]string{} // credential → the account that holds it
	for _, name := range slices.Sorted(maps.Keys(a.ByName)) {
		key := "accounts." + name
		switch {
		case name == DefaultAccount:
			if a.DeclaredDefault {
				errs = append(errs, fmt.Errorf("%s: the section's own keys are the account named %s; name this account otherwise", key, name))
			}
			key = ""
		case !validAccountName(name):
			errs = append(errs, fmt.Errorf("%s: an account's name is part of its routes (%s/NAME): use 1 to 32 lower-case letters, digits, - and _, starting with a letter or digit", key, a.Route))
			continue
		default:
			errs = append(errs, config.PrefixKeys(key, a.Validate(a.ByName[name])))
		}
		for _, cred := range a.Credentials(a.ByName[name]) {
			if cred.Value == "" || cred.Value == config.Redacted {
				continue // the mask config check prints is a warning of its own
			}
			id := cred.Key + "\x00" + cred.Value
			if other, dup := seen[id]; dup {
				errs = append(errs, fmt.Errorf("%s: the same %s as account %s; each account is an app of its own, with its own credentials", subKey(key, cred.Key), cred.Key, other))
				continue
			}
			seen[id] = name
		}
	}
	return errors.Join(config.FlattenProblems(errs...)...)
}

// subKey is key.sub, or sub for the section's own key.
func subKey(key, sub string) string {
	if key == "" {
		return sub
	}
	return key + "." + sub
}

// AccountNames lists a platform section's accounts: DefaultAccount first
// when withOwn (the section's own keys configure an app), then the named
// ones, sorted. The policy tree's accounts levels may name only these.
func AccountNames[A any](withOwn bool, named map[string]A) []string {
	var names []string
	if withOwn {
		names = append(names, DefaultAccount)
	}
	return append(names, slices.Sorted(maps.Keys(named))...)
}

// AccountConfigs is every account of a platform section by name: own as
// DefaultAccount when withOwn, and each named account as config makes it
// from its keys. An account written with nothing under it ("hr:") is an
// account with nothing set, which validation then refuses by its key,
// not one left out without a word.
func AccountConfigs[C, A any](withOwn bool, own C, named map[string]*A, config func(*A) C) map[string]C {
	out := make(map[string]C, len(named)+1)
	if withOwn {
		out[DefaultAccount] = own
	}
	for name, acc := range named {
		if acc == nil {
			acc = new(A)
		}
		out[name] = config(acc)
	}
	return out
}

// OpenEachAccount opens one adapter per account of a platform's section,
// in the order of their names: open is given each account's
// configuration and its name as Message.Account carries it ("" for the
// section's own, DefaultAccount). A failure names the account.
func OpenEachAccount[C, A any](platform string, accs map[string]C, open func(cfg C, account string) (A, error)) ([]A, error) {
	out := make([]A, 0, len(accs))
	for _, name := range slices.Sorted(maps.Keys(accs)) {
		account := name
		if name == DefaultAccount {
			account = ""
		}
		a, err := open(accs[name], account)
		if err != nil {
			return nil, fmt.Errorf("%s account %s: %w", platform, name, err)
		}
		out = append(out, a)
	}
	return out, nil
}
