package channels_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/parleyhq/parley/channels"
)

type plain struct{}

func (plain) Name() string                                                 { return "plain" }
func (plain) Send(context.Context, channels.Message, channels.Reply) error { return nil }

type awaitedHealthy struct{ plain }

func (awaitedHealthy) AwaitsEveryReply() {}
func (awaitedHealthy) Ready() error      { return nil }

// TestCapabilitiesOf: each capability is found once, from the adapter's
// type, and the table names every optional interface Capabilities has a
// field for.
func TestCapabilitiesOf(t *testing.T) {
	t.Parallel()
	if got := channels.CapabilitiesOf(plain{}).Names(); len(got) != 0 {
		t.Errorf("a plain channel has %v; want none", got)
	}
	c := channels.CapabilitiesOf(awaitedHealthy{})
	if got := c.Names(); !slices.Equal(got, []string{"Health", "Awaited"}) {
		t.Errorf("Names() = %v; want [Health Awaited]", got)
	}
	if c.Health == nil || c.Awaited == nil || c.Runner != nil || !c.Has("Health") || c.Has("Runner") {
		t.Errorf("fields do not match the interfaces implemented: %+v", c)
	}
	fields := reflect.TypeFor[channels.Capabilities]().NumField() - 1 // less Channel
	if n := len(channels.CapabilityTable()); n != fields {
		t.Errorf("the table has %d entries and Capabilities %d interface fields", n, fields)
	}
	for _, e := range channels.CapabilityTable() {
		if e.Interface.Kind() != reflect.Interface || e.Interface.Name() != e.Name {
			t.Errorf("entry %q names interface %v", e.Name, e.Interface)
		}
	}
}
