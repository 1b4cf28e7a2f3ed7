package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadWithWarnings is Load that also returns what is suspect but not
// wrong, each naming its key: a variable overriding a key the file sets
// too (the variable wins, which is easy to miss), and a secret that is the
// mask `parley config check` prints rather than a secret.
func LoadWithWarnings(path string, getenv func(string) string) (Config, []string, error) {
	cfg := Default()
	if path == "" {
		path = getenv("PARLEY_CONFIG")
	}
	file := &fileIndex{}
	var typeErrs []string // wrong types and unknown keys: the rest of the file is still read
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, nil, fmt.Errorf("config: %w", err)
		}
		if file, typeErrs, err = decode(data, &cfg); err != nil {
			return cfg, nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	fromEnv, warnings := cfg.envOverrides(file, getenv)
	if err := applyEnv(&cfg, getenv); err != nil {
		return cfg, warnings, err
	}
	cfg.Home = expandHome(cfg.Home)
	warnings = append(warnings, cfg.maskedSecrets(file, fromEnv)...)
	problems := typeErrs
	for _, p := range cfg.problems() {
		problems = append(problems, file.locate(p, fromEnv))
	}
	if len(problems) > 0 {
		return cfg, warnings, &Invalid{Path: path, List: InLineOrder(problems)}
	}
	return cfg, warnings, nil
}

// Invalid is every problem of a configuration that is refused: the
// values of the wrong type, the unknown keys and what validation found,
// each naming its key, and its line when the file sets it.
type Invalid struct {
	Path string   // the file; "" when there is none (the environment alone)
	List []string // in line order (see InLineOrder)
}

func (p *Invalid) Error() string {
	const head = "invalid config"
	if len(p.List) == 1 {
		return head + ": " + p.List[0]
	}
	return fmt.Sprintf("%s: %d problems:\n%s", head, len(p.List), strings.Join(p.List, "\n"))
}

// InLineOrder sorts problems and warnings that start "line N:" (or
// "warning: line N:") by N,
// keeping the order of those on one line; those without a line (a value
// from an environment variable, a key the file leaves out) come last, in
// the order given.
func InLineOrder(msgs []string) []string {
	out := slices.Clone(msgs)
	slices.SortStableFunc(out, func(a, b string) int {
		la, oka := lineOf(a)
		lb, okb := lineOf(b)
		switch {
		case oka && okb:
			return la - lb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	return out
}

// lineOf reads the N of a message starting "line N:" (after "warning: ",
// if it is one).
func lineOf(msg string) (int, bool) {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(msg, "warning: "), "line ")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ":")
	n, err := strconv.Atoi(num)
	return n, ok && err == nil
}

// decode reads the file into cfg and returns where its keys are. The file
// is one YAML document: a second one (after ---) would be ignored by the
// decoder, so it is refused rather than silently dropped. A file that is
// not YAML is an error; values of the wrong type and unknown keys are
// typeErrs, one a problem, with every other value still read, so that
// validation can report its problems beside them.
func decode(data []byte, cfg *Config) (file *fileIndex, typeErrs []string, err error) {
	file = &fileIndex{}
	nodes := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := nodes.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return file, nil, nil // an empty file is a valid, empty config
		}
		return file, nil, cleanSyntaxError(err)
	}
	var next yaml.Node
	if err := nodes.Decode(&next); !errors.Is(err, io.EOF) {
		return file, nil, fmt.Errorf("line %d: a second YAML document starts here (after ---); the configuration is one document: remove the --- and merge what follows into the first", next.Line)
	}
	file.index(&root, "")

	doc := cfg.document()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(doc.Addr().Interface()); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return file, nil, cleanSyntaxError(err)
		}
		typeErrs = file.typeErrors(te)
	}
	cfg.fromDocument(doc)
	return file, typeErrs, nil
}

func cleanSyntaxError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

// visitValues calls fn with every value under v and its key, the sections'
// included: struct fields by their yaml key, list items as key[i], map
// entries as key.NAME.
func visitValues(v reflect.Value, path string, fn func(path string, v reflect.Value)) {
	if path != "" {
		fn(path, v)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			visitValues(v.Elem(), path, fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			name, inline, ok := YAMLField(v.Type().Field(i))
			switch {
			case !ok:
			case inline:
				visitValues(v.Field(i), path, fn)
			default:
				visitValues(v.Field(i), JoinKey(path, name), fn)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			visitValues(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			visitValues(v.MapIndex(k), JoinKey(path, fmt.Sprint(k)), fn)
		}
	}
}

// envOverrides returns the keys the environment sets, with the variable
// that sets each, and a warning for each of them the file sets too: the
// variable wins, which a reader of the file would not guess. A file value
// that is the mask `parley config check` prints, or a ${NAME} reference
// to the variable, is meant to be filled from the environment and is not
// warned about. No value is named.
func (c *Config) envOverrides(file *fileIndex, getenv func(string) string) (map[string]string, []string) {
	fromEnv := map[string]string{}
	var warnings []string
	for _, b := range c.envBindings() {
		if b.Key == "" || getenv(b.Name) == "" {
			continue
		}
		fromEnv[b.Key] = b.Name
		e, ok := file.entry(b.Key)
		if !ok || e.kind != yaml.ScalarNode || e.value == "" || e.value == Redacted || strings.Contains(e.value, "${"+b.Name+"}") {
			continue
		}
		warnings = append(warnings, fmt.Sprintf("line %d: %s is set in the file and by the environment variable %s; the variable wins", e.line, b.Key, b.Name))
	}
	return fromEnv, warnings
}

// maskedSecrets warns of every secret whose value is what `parley config
// check` prints in its place (<secret>, or a URL's xxxxx password): a
// printed configuration read back, whose real secrets must be supplied.
func (c *Config) maskedSecrets(file *fileIndex, fromEnv map[string]string) []string {
	vars := map[string]string{}
	for _, b := range c.envBindings() {
		if b.Key != "" {
			vars[b.Key] = b.Name
		}
	}
	var warnings []string
	visitValues(c.document(), "", func(path string, v reflect.Value) {
		masked := false
		switch v.Type() {
		case reflect.TypeFor[Secret](), reflect.TypeFor[SecretTemplate]():
			masked = v.String() == Redacted
		case reflect.TypeFor[SecretURL]():
			masked = strings.Contains(v.String(), ":"+maskedValue+"@") || strings.Contains(v.String(), "="+maskedValue)
		}
		if !masked {
			return
		}
		w := fmt.Sprintf("%s: the value is the mask parley config check prints, not a secret; supply the real one", path)
		if name := vars[path]; name != "" {
			w += fmt.Sprintf(" (in the file or in %s)", name)
		}
		if e, ok := file.entry(path); ok && fromEnv[path] == "" {
			w = fmt.Sprintf("line %d: %s", e.line, w)
		}
		warnings = append(warnings, w)
	})
	return warnings
}
