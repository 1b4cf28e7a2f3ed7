package config

import (
	"fmt"
	"reflect"
	"strings"
)

// Platform is one chat platform as the configuration knows it. Each
// adapter package registers its own in an init function, so that the file
// format, validation, `parley config check`, the environment variables,
// the policy tree and the wiring of `parley serve` all learn the platform
// from that one place:
//
//	func init() {
//		config.RegisterPlatform(config.Platform{Name: Name, NewConfig: func() config.PlatformConfig { return DefaultConfig() }})
//	}
//
// The binary links the adapters in by importing them (channels/install).
type Platform struct {
	// Name is the platform's name everywhere: the first part of its
	// conversation keys, its key under policies.platforms, the channel
	// label of its metrics and the top-level key of its section in the
	// file. Lower case, e.g. "slack".
	Name string
	// NewConfig returns a new section with the platform's defaults, as a
	// pointer the file and the environment are decoded into. Nil for a
	// platform without settings (the console).
	NewConfig func() PlatformConfig
	// Policy is the platform's builtin policy level, nil for none. It is
	// consulted above policies.default and below policies.platforms.<Name>,
	// so a global rule written with other platforms in mind does not reach
	// it, while the platform's own section still can.
	Policy *Level
}

// SectionConfig is a section of the file whose type lives in the package
// that uses it: a platform's (e.g. *slack.Config) or a tool's (e.g.
// *web.FetchConfig). Secret-bearing fields must be of type Secret (or
// SecretURL, SecretTemplate): nothing else keeps them out of
// `config check` and logs.
type SectionConfig interface {
	// Env binds the environment variables that override the section's
	// keys, e.g. Env("SLACK_BOT_TOKEN", &c.BotToken).
	Env() []EnvVar
	// Validate checks the section and returns every problem, each naming
	// its key relative to the section ("bot_token: …") and, when one sets
	// it, the environment variable. Use errors.Join for several. It is run
	// by Load, so `parley config check` refuses what `serve` would.
	Validate() error
}

// PlatformConfig is a platform's section of the file (its type lives in
// the adapter package, e.g. *slack.Config).
type PlatformConfig interface {
	SectionConfig
	// Enabled reports whether the section turns the platform on (its
	// credentials are set).
	Enabled() bool
}

// EnvVar binds one environment variable to the field it overrides.
type EnvVar struct {
	Name string
	set  func(string) error
	// field points at the field the variable overrides, so that the
	// variable can be named with its key (see EnvBindings): in
	// docs/configuration.md, and when it overrides a key the file sets.
	field any
}

// Env binds the variable name to field, a string, Secret or SecretURL:
// a non-empty value replaces the field.
func Env[T ~string](name string, field *T) EnvVar {
	return EnvVar{Name: name, field: field, set: func(v string) error { *field = T(v); return nil }}
}

// Set gives the field v binds the variable's value, as Load does with a
// non-empty value from the environment.
func (v EnvVar) Set(value string) error { return v.set(value) }

// platforms holds the registered platforms.
var platforms = &registry[Platform]{kind: "platform"}

// RegisterPlatform adds p to the platforms every configuration knows. Call
// it from the adapter package's init function. It panics on an empty or
// duplicate name, a name that is already a top-level key of the file, and
// a section that is not a pointer, since each is a programming error.
func RegisterPlatform(p Platform) {
	if coreKeys()[p.Name] {
		panic(fmt.Sprintf("config: platform name %q is a top-level key of the file already", p.Name))
	}
	if _, ok := sections.get(p.Name); ok {
		panic(fmt.Sprintf("config: platform name %q is a registered section's", p.Name))
	}
	if p.NewConfig != nil {
		checkSection("platform", p.Name, p.NewConfig)
	}
	platforms.add(p.Name, p)
}

// Platforms returns every registered platform, sorted by name.
func Platforms() []Platform { return platforms.all() }

// PlatformNames returns the names of every registered platform, sorted.
func PlatformNames() []string {
	var names []string
	for _, p := range Platforms() {
		names = append(names, p.Name)
	}
	return names
}

// LookupPlatform returns the registered platform called name.
func LookupPlatform(name string) (Platform, bool) { return platforms.get(name) }

// Section returns c's section of the platform called name as T, the type
// its NewConfig returns; ok is false when c has no such section (a Config
// built by hand, or a platform that is not registered).
func Section[T PlatformConfig](c Config, name string) (T, bool) {
	s, ok := c.Platforms[name].(T)
	return s, ok
}

// coreKeys are the top-level keys of the file that are not platforms.
func coreKeys() map[string]bool {
	keys := map[string]bool{ToolsKey: true}
	t := reflect.TypeOf(core{})
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

// validatePlatforms runs every section's Validate and returns its problems
// with their keys made absolute ("slack.bot_token: …").
func (c Config) validatePlatforms() []string {
	var problems []string
	for _, p := range Platforms() {
		if sec, ok := c.Platforms[p.Name]; ok && sec != nil {
			problems = append(problems, keyed(p.Name, sec.Validate())...)
		}
	}
	return problems
}

// keyed splits err (errors.Join'ed problems, each naming a key relative to
// prefix) into its problems with their keys made absolute.
func keyed(prefix string, err error) []string {
	errs := FlattenProblems(err)
	problems := make([]string, 0, len(errs))
	for _, e := range errs {
		problems = append(problems, prefix+"."+e.Error())
	}
	return problems
}

// FlattenProblems lists the problems of errs with every errors.Join'ed
// list opened, at any depth, so that each problem is a line of its own
// with its own key (config places each on its line).
func FlattenProblems(errs ...error) []error {
	var out []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			out = append(out, FlattenProblems(joined.Unwrap()...)...)
			continue
		}
		out = append(out, err)
	}
	return out
}

// PrefixKeys returns err, a section's problems as its Validate reports
// them (keys relative to the section, errors.Join'ed), with every key put
// under prefix: PrefixKeys("tools.mcp", err) turns "servers.x.url: …" into
// "tools.mcp.servers.x.url: …". Nil stays nil.
func PrefixKeys(prefix string, err error) error {
	return Problems(keyed(prefix, err))
}

// document is the file as yaml sees it: the core keys and the registered
// sections in their printed order (see keyOrder), the tool sections under
// tools:, then one field per registered platform holding that platform's
// section. It is built at run time because the sections are only known
// then; decoding into it keeps yaml's strictness (unknown keys inside a
// section are errors with their line) and marshalling it prints the
// sections in place.
func (c *Config) document() reflect.Value {
	var fields []reflect.StructField
	var values []reflect.Value
	cv := reflect.ValueOf(core(*c))
	for _, l := range c.topLevels() {
		if l.core >= 0 {
			f := cv.Type().Field(l.core)
			fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
			values = append(values, cv.Field(l.core))
			continue
		}
		sec := c.Sections[l.key]
		fields = append(fields, reflect.StructField{
			Name: fmt.Sprintf("Section%d", len(fields)),
			Type: reflect.TypeOf(sec),
			Tag:  reflect.StructTag(fmt.Sprintf(`yaml:%q`, l.key)),
		})
		values = append(values, reflect.ValueOf(sec))
	}
	if tools := c.toolsDocument(); tools.IsValid() {
		fields = append(fields, reflect.StructField{Name: "Tools", Type: tools.Type(), Tag: reflect.StructTag(fmt.Sprintf(`yaml:%q`, ToolsKey))})
		values = append(values, tools)
	}
	for _, p := range Platforms() {
		if sec, ok := c.Platforms[p.Name]; ok && sec != nil {
			fields = append(fields, reflect.StructField{
				Name: fmt.Sprintf("Platform%d", len(fields)),
				Type: reflect.TypeOf(sec),
				Tag:  reflect.StructTag(fmt.Sprintf(`yaml:%q`, p.Name)),
			})
			values = append(values, reflect.ValueOf(sec))
		}
	}
	doc := reflect.New(reflect.StructOf(fields)).Elem()
	for i, v := range values {
		doc.Field(i).Set(v)
	}
	return doc
}

// fromDocument copies a decoded document back into c. A section written
// as null in the file keeps its defaults.
func (c *Config) fromDocument(doc reflect.Value) {
	cc := core(*c)
	cv := reflect.ValueOf(&cc).Elem()
	for i := range doc.NumField() {
		f := doc.Type().Field(i)
		name := f.Tag.Get("yaml")
		if cf, ok := cv.Type().FieldByName(f.Name); ok && cf.Type == f.Type {
			cv.FieldByIndex(cf.Index).Set(doc.Field(i))
			continue
		}
		if name == ToolsKey {
			c.fromToolsDocument(doc.Field(i))
			continue
		}
		sec, ok := doc.Field(i).Interface().(SectionConfig)
		if !ok || reflect.ValueOf(sec).IsNil() {
			continue
		}
		if p, isPlatform := sec.(PlatformConfig); isPlatform && strings.HasPrefix(f.Name, "Platform") {
			c.Platforms[name] = p
		} else {
			c.Sections[name] = sec
		}
	}
	platforms, tools, secs := c.Platforms, c.Tools, c.Sections
	*c = Config(cc)
	c.Platforms, c.Tools, c.Sections = platforms, tools, secs
}
