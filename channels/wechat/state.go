package wechat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/parleyhq/parley/channels"
)

// Account is one personal-WeChat bot logged in over iLink.
type Account struct {
	BotID    string    `json:"bot_id"`
	Token    string    `json:"bot_token"`
	BaseURL  string    `json:"base_url"`
	UserID   string    `json:"user_id,omitempty"` // the WeChat user who scanned the code
	LoggedIn time.Time `json:"logged_in"`
	// Expired is set when iLink answered errcode -14 to this token: the
	// session ended and the operator must log in again.
	Expired bool `json:"-"`
}

// Session is "active" or "expired".
func (a Account) Session() string {
	if a.Expired {
		return "expired"
	}
	return "active"
}

// State keeps iLink accounts and their getupdates cursors: in Redis when
// Redis is configured, else in a 0600 file under $PARLEY_HOME.
type State interface {
	// Accounts lists every logged-in account, sorted by bot id.
	Accounts(ctx context.Context) ([]Account, error)
	// Account returns one account.
	Account(ctx context.Context, bot string) (Account, bool, error)
	// SaveAccount stores a (re-)logged-in account; it clears an expiry.
	SaveAccount(ctx context.Context, a Account) error
	// MarkExpired records that token of bot is no longer valid. A newer
	// login (another token) is not affected.
	MarkExpired(ctx context.Context, bot, token string) error
	// Cursor is the persisted get_updates_buf of bot ("" at first).
	Cursor(ctx context.Context, bot string) (string, error)
	// SaveCursor persists the cursor after a batch was handed over.
	SaveCursor(ctx context.Context, bot, cursor string) error
}

// RedisState is State in Redis under a key prefix.
type RedisState struct {
	client redis.UniversalClient
	prefix string
}

// NewRedisState returns the Redis state store.
func NewRedisState(client redis.UniversalClient, prefix string) *RedisState {
	return &RedisState{client: client, prefix: prefix}
}

func (s *RedisState) accountsKey() string { return s.prefix + "wechat:ilink:accounts" }
func (s *RedisState) expiredKey(bot string) string {
	return s.prefix + "wechat:ilink:{" + bot + "}:expired"
}
func (s *RedisState) cursorKey(bot string) string {
	return s.prefix + "wechat:ilink:{" + bot + "}:cursor"
}

// Accounts implements State.
func (s *RedisState) Accounts(ctx context.Context) ([]Account, error) {
	all, err := s.client.HGetAll(ctx, s.accountsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("wechat: read accounts: %w", err)
	}
	var out []Account
	for bot, raw := range all {
		var a Account
		if err := json.Unmarshal([]byte(raw), &a); err != nil || a.BotID == "" {
			continue // a broken entry is skipped; login rewrites it
		}
		exp, err := s.client.Get(ctx, s.expiredKey(bot)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("wechat: read accounts: %w", err)
		}
		a.Expired = exp != "" && exp == a.Token
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BotID < out[j].BotID })
	return out, nil
}

// Account implements State.
func (s *RedisState) Account(ctx context.Context, bot string) (Account, bool, error) {
	raw, err := s.client.HGet(ctx, s.accountsKey(), bot).Result()
	if errors.Is(err, redis.Nil) {
		return Account{}, false, nil
	}
	if err != nil {
		return Account{}, false, fmt.Errorf("wechat: read account: %w", err)
	}
	var a Account
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return Account{}, false, fmt.Errorf("wechat: account %s is unreadable; log in again: %w", bot, err)
	}
	exp, err := s.client.Get(ctx, s.expiredKey(bot)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Account{}, false, fmt.Errorf("wechat: read account: %w", err)
	}
	a.Expired = exp != "" && exp == a.Token
	return a, true, nil
}

// SaveAccount implements State.
func (s *RedisState) SaveAccount(ctx context.Context, a Account) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.accountsKey(), a.BotID, raw)
		p.Del(ctx, s.expiredKey(a.BotID))
		return nil
	})
	if err != nil {
		return fmt.Errorf("wechat: save account: %w", err)
	}
	return nil
}

// MarkExpired implements State.
func (s *RedisState) MarkExpired(ctx context.Context, bot, token string) error {
	if err := s.client.Set(ctx, s.expiredKey(bot), token, 0).Err(); err != nil {
		return fmt.Errorf("wechat: mark session expired: %w", err)
	}
	return nil
}

// Cursor implements State.
func (s *RedisState) Cursor(ctx context.Context, bot string) (string, error) {
	c, err := s.client.Get(ctx, s.cursorKey(bot)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("wechat: read cursor: %w", err)
	}
	return c, nil
}

// SaveCursor implements State.
func (s *RedisState) SaveCursor(ctx context.Context, bot, cursor string) error {
	if err := s.client.Set(ctx, s.cursorKey(bot), cursor, 0).Err(); err != nil {
		return fmt.Errorf("wechat: save cursor: %w", err)
	}
	return nil
}

// FileState is State in two 0600 files under $PARLEY_HOME: wechat.json
// holds the logins and is written only by `parley wechat login`;
// wechat-state.json holds cursors and expiry marks and is written only by
// `parley serve`. Each process writing its own file (atomically, by
// rename) means neither can overwrite the other's update. Both are read
// on every call, so a running serve sees a new login.
type FileState struct {
	path, statePath string
	mu              sync.Mutex
}

// StateFileName is the login file FileState keeps under the home directory.
const StateFileName = "wechat.json"

// CursorFileName is the file of cursors and expiry marks.
const CursorFileName = "wechat-state.json"

// NewFileState returns the file state store under home.
func NewFileState(home string) *FileState {
	return &FileState{path: filepath.Join(home, StateFileName), statePath: filepath.Join(home, CursorFileName)}
}

// NewAccountFileState returns the file state store of an account's iLink
// logins under home: the section's own files for the default account ("" or
// default), wechat.NAME.json and wechat-state.NAME.json for another.
func NewAccountFileState(home, account string) *FileState {
	if account == "" || account == channels.DefaultAccount {
		return NewFileState(home)
	}
	return &FileState{path: filepath.Join(home, "wechat."+account+".json"), statePath: filepath.Join(home, "wechat-state."+account+".json")}
}

// Path is the login file.
func (s *FileState) Path() string { return s.path }

type loginFile struct {
	Accounts map[string]Account `json:"accounts"`
}

type cursorFile struct {
	Expired map[string]string `json:"expired,omitempty"` // bot → expired token
	Cursors map[string]string `json:"cursors,omitempty"`
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("wechat: read %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("wechat: %s is not valid JSON (fix or delete it and log in again): %w", path, err)
	}
	return nil
}

// writeJSON replaces path atomically with a 0600 file.
func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("wechat: create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".wechat-*.json")
	if err != nil {
		return fmt.Errorf("wechat: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("wechat: write %s: %w", path, err)
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("wechat: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("wechat: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("wechat: write %s: %w", path, err)
	}
	return nil
}

func (s *FileState) logins() (loginFile, error) {
	var d loginFile
	err := readJSON(s.path, &d)
	if d.Accounts == nil {
		d.Accounts = map[string]Account{}
	}
	return d, err
}

func (s *FileState) cursors() (cursorFile, error) {
	var d cursorFile
	err := readJSON(s.statePath, &d)
	if d.Expired == nil {
		d.Expired = map[string]string{}
	}
	if d.Cursors == nil {
		d.Cursors = map[string]string{}
	}
	return d, err
}

func (s *FileState) updateCursors(fn func(*cursorFile)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.cursors()
	if err != nil {
		return err
	}
	fn(&d)
	return writeJSON(s.statePath, d)
}

// Accounts implements State.
func (s *FileState) Accounts(context.Context) ([]Account, error) {
	s.mu.Lock()
	l, err := s.logins()
	c, cerr := s.cursors()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	var out []Account
	for bot, a := range l.Accounts {
		a.BotID = bot
		a.Expired = c.Expired[bot] != "" && c.Expired[bot] == a.Token
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].BotID < out[j].BotID })
	return out, nil
}

// Account implements State.
func (s *FileState) Account(ctx context.Context, bot string) (Account, bool, error) {
	all, err := s.Accounts(ctx)
	if err != nil {
		return Account{}, false, err
	}
	for _, a := range all {
		if a.BotID == bot {
			return a, true, nil
		}
	}
	return Account{}, false, nil
}

// SaveAccount implements State. A new token is never the expired one, so
// the expiry mark needs no clearing here.
func (s *FileState) SaveAccount(_ context.Context, a Account) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, err := s.logins()
	if err != nil {
		return err
	}
	l.Accounts[a.BotID] = a
	return writeJSON(s.path, l)
}

// MarkExpired implements State.
func (s *FileState) MarkExpired(_ context.Context, bot, token string) error {
	return s.updateCursors(func(d *cursorFile) { d.Expired[bot] = token })
}

// Cursor implements State.
func (s *FileState) Cursor(_ context.Context, bot string) (string, error) {
	s.mu.Lock()
	d, err := s.cursors()
	s.mu.Unlock()
	return d.Cursors[bot], err
}

// SaveCursor implements State.
func (s *FileState) SaveCursor(_ context.Context, bot, cursor string) error {
	return s.updateCursors(func(d *cursorFile) { d.Cursors[bot] = cursor })
}
