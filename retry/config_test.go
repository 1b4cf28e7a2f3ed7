package retry

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfig(t *testing.T) {
	defaults := Config{MaxAttempts: 3, Base: 500 * time.Millisecond, Max: 5 * time.Second}
	var c Config
	if err := yaml.Unmarshal([]byte("max_attempts: 5\nbase: 2s\n"), &c); err != nil {
		t.Fatal(err)
	}
	got := c.Or(defaults)
	if want := (Config{MaxAttempts: 5, Base: 2 * time.Second, Max: 5 * time.Second}); got != want {
		t.Errorf("Or = %+v, want %+v (the zero max from the defaults)", got, want)
	}
	if p := got.Policy(); p.Attempts != 5 || p.MinWait != 2*time.Second || p.MaxWait != 5*time.Second {
		t.Errorf("Policy = %+v", p)
	}
	if b := got.Backoff(); b.Min != 2*time.Second || b.Max != 5*time.Second {
		t.Errorf("Backoff = %+v", b)
	}
	if got := (Config{Base: time.Minute}).Or(defaults); got.Max != time.Minute {
		t.Errorf("a max below base is not raised to it: %+v", got)
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the zero Config (every default) is refused: %v", err)
	}
	err := (Config{MaxAttempts: -1, Base: 2 * time.Second, Max: time.Second}).Validate()
	for _, key := range []string{"retry.max_attempts:", "retry.max:"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate = %v; want an error naming %s", err, key)
		}
	}
}
