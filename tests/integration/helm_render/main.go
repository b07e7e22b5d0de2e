// helm_render renders a Helm chart the way `helm template` does, for the chart test where Helm
// itself is not installed. Helm's template engine is Go's text/template plus a function map
// (Sprig's and Helm's own); this program is that engine with only the functions our chart uses,
// each with Sprig's or Helm's signature and meaning, so a chart that calls anything else fails
// to parse here ("function ... not defined") instead of rendering something Helm would not.
//
// YAML stays out of it: the caller reads Chart.yaml and values.yaml (python3-yaml) and passes
// them as JSON, so values arrive as Helm has them (numbers are float64, as after Helm's
// YAML-to-JSON conversion). Overrides are merged over the values like Helm's --values/--set:
// maps merge key by key, anything else replaces, and null deletes.
//
//	go run main.go -chart DIR -chart-json CHART.json -values-json VALUES.json \
//	    [-set-json '{"auth":{"rpcSecret":"..."}}']... [-lookup OBJECTS.json] [-name R] \
//	    [-namespace NS] [-json] [-lax]
//
// Helm's lookup asks the cluster; `helm template` has none, so there it returns an empty map, as
// here. -lookup stands in for a cluster: a JSON object mapping "<apiVersion>/<kind>/<namespace>/
// <name>" (e.g. "v1/Secret/lakes/lake-openlake") to the object lookup returns for it, as the API
// server would give it (a Secret's data base64-encoded), so a test can render an upgrade.
//
// Output: the rendered templates as `helm template` prints them ("---" and "# Source: ..."
// before each non-empty one; NOTES.txt last, under "# NOTES.txt"), or with -json one object
// {"manifests": {"<chart>/templates/<file>": text, ...}, "notes": text}. A render error goes
// to stderr with exit status 1. By default a missing map key is an error (-lax: Helm's default,
// where it renders as nothing), so a template cannot read a value values.yaml does not define.
package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// The objects a template sees as .Chart, .Release and .Capabilities: structs, as in Helm, so a
// misspelt field is an error.
type chartMeta struct {
	Name, Version, AppVersion, Description, Type, APIVersion, KubeVersion, Home string
	Keywords, Sources                                                           []string
}

type release struct {
	Name, Namespace, Service string
	IsInstall, IsUpgrade     bool
	Revision                 int
}

type kubeVersion struct{ Version, Major, Minor, GitVersion string }

type capabilities struct{ KubeVersion kubeVersion }

type templateInfo struct{ Name, BasePath string }

func main() {
	chartDir := flag.String("chart", "", "chart folder (its templates/ are rendered)")
	chartJSON := flag.String("chart-json", "", "Chart.yaml as JSON")
	valuesJSON := flag.String("values-json", "", "values.yaml as JSON")
	var sets stringList
	flag.Var(&sets, "set-json", "JSON object merged over the values (repeatable, in order)")
	name := flag.String("name", "release-name", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	asJSON := flag.Bool("json", false, "print one JSON object instead of YAML documents")
	lax := flag.Bool("lax", false, "missing map keys render as nothing (Helm's default)")
	lookupJSON := flag.String("lookup", "", "objects lookup finds, as JSON (default: none)")
	flag.Parse()
	if *chartDir == "" || *chartJSON == "" || *valuesJSON == "" {
		fmt.Fprintln(os.Stderr, "helm_render: -chart, -chart-json and -values-json are required")
		os.Exit(2)
	}
	objects := map[string]json.RawMessage{}
	if *lookupJSON != "" {
		if err := readJSON(*lookupJSON, &objects); err != nil {
			fmt.Fprintf(os.Stderr, "helm_render: -lookup: %v\n", err)
			os.Exit(2)
		}
	}
	manifests, notes, err := render(*chartDir, *chartJSON, *valuesJSON, sets, objects, *name,
		*namespace, *lax)
	if err != nil {
		fmt.Fprintf(os.Stderr, "helm_render: %v\n", err)
		os.Exit(1)
	}
	if *asJSON {
		out, _ := json.Marshal(map[string]interface{}{"manifests": manifests, "notes": notes})
		fmt.Println(string(out))
		return
	}
	names := make([]string, 0, len(manifests))
	for n := range manifests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("---\n# Source: %s\n%s\n", n, manifests[n])
	}
	if notes != "" {
		fmt.Printf("# NOTES.txt\n%s\n", notes)
	}
}

func readJSON(path string, into interface{}) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

func render(dir, chartJSON, valuesJSON string, sets []string, objects map[string]json.RawMessage,
	name, namespace string, lax bool) (map[string]string, string, error) {
	var meta map[string]interface{}
	if err := readJSON(chartJSON, &meta); err != nil {
		return nil, "", err
	}
	var values map[string]interface{}
	if err := readJSON(valuesJSON, &values); err != nil {
		return nil, "", err
	}
	if values == nil {
		values = map[string]interface{}{}
	}
	for _, s := range sets {
		var over map[string]interface{}
		if err := json.Unmarshal([]byte(s), &over); err != nil {
			return nil, "", fmt.Errorf("-set-json %s: %v", s, err)
		}
		merge(values, over)
	}
	chart := chartMeta{
		Name: str(meta["name"]), Version: str(meta["version"]), AppVersion: str(meta["appVersion"]),
		Description: str(meta["description"]), Type: str(meta["type"]),
		APIVersion: str(meta["apiVersion"]), KubeVersion: str(meta["kubeVersion"]),
		Home: str(meta["home"]), Keywords: strs(meta["keywords"]), Sources: strs(meta["sources"]),
	}
	if chart.APIVersion != "v2" || chart.Name == "" || chart.Version == "" {
		return nil, "", errors.New("Chart.yaml needs apiVersion v2, a name and a version")
	}

	// One template set for all files, named <chart>/templates/<file> as Helm names them, so
	// that defines in _*.tpl are visible everywhere and errors name the file.
	files, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	if err != nil {
		return nil, "", err
	}
	sort.Strings(files)
	root := template.New("gotpl")
	if lax {
		root.Option("missingkey=zero")
	} else {
		root.Option("missingkey=error")
	}
	root.Funcs(funcMap(root, objects))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, "", err
		}
		tname := chart.Name + "/templates/" + filepath.Base(f)
		if _, err := root.New(tname).Parse(string(data)); err != nil {
			return nil, "", err
		}
	}

	top := map[string]interface{}{
		"Values": values,
		"Chart":  chart,
		"Release": release{Name: name, Namespace: namespace, Service: "Helm", IsInstall: true,
			Revision: 1},
		"Capabilities": capabilities{kubeVersion{"v1.28.0", "1", "28", "v1.28.0"}},
	}
	manifests := map[string]string{}
	notes := ""
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasPrefix(base, "_") {
			continue // partials: defines only
		}
		tname := chart.Name + "/templates/" + base
		top["Template"] = templateInfo{Name: tname, BasePath: chart.Name + "/templates"}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, tname, top); err != nil {
			return nil, "", err
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			notes = out
		} else if strings.TrimSpace(out) != "" {
			manifests[tname] = out
		}
	}
	return manifests, notes, nil
}

// merge copies over into dst as Helm coalesces user values over a chart's: maps merge
// recursively, other values replace, and null removes the key.
func merge(dst, over map[string]interface{}) {
	for k, v := range over {
		if v == nil {
			delete(dst, k)
			continue
		}
		om, oIsMap := v.(map[string]interface{})
		dm, dIsMap := dst[k].(map[string]interface{})
		if oIsMap && dIsMap {
			merge(dm, om)
		} else {
			dst[k] = v
		}
	}
}

func str(v interface{}) string {
	if v == nil {
		return ""
	}
	return strval(v)
}

func strs(v interface{}) []string {
	list, _ := v.([]interface{})
	out := []string{}
	for _, x := range list {
		out = append(out, strval(x))
	}
	return out
}

// funcMap: the functions the chart may use. Each has the signature of Sprig v3 or of Helm's
// engine (pkg/engine/funcs.go), because text/template checks argument types against it.
func funcMap(root *template.Template, objects map[string]json.RawMessage) template.FuncMap {
	return template.FuncMap{
		// Helm's own.
		"include": func(name string, data interface{}) (string, error) {
			var buf bytes.Buffer
			if err := root.ExecuteTemplate(&buf, name, data); err != nil {
				return "", err
			}
			return buf.String(), nil
		},
		// One object, or an empty map when there is none (as always under `helm template`). A
		// list (name "") is not needed by the chart, so it is refused rather than faked.
		"lookup": func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
			if name == "" {
				return nil, errors.New("lookup: listing (an empty name) is not implemented here")
			}
			obj := map[string]interface{}{}
			if raw, ok := objects[apiVersion+"/"+kind+"/"+namespace+"/"+name]; ok {
				// Decoded on each call: a fresh copy, as each call to the API server gives.
				if err := json.Unmarshal(raw, &obj); err != nil {
					return nil, fmt.Errorf("lookup %s %s %s/%s: %v", apiVersion, kind, namespace,
						name, err)
				}
			}
			return obj, nil
		},
		"toYaml": func(v interface{}) string { return strings.TrimSuffix(toYAML(v), "\n") },
		// Sprig's.
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
		"default": func(d interface{}, given ...interface{}) interface{} {
			if len(given) == 0 || empty(given[0]) {
				return d
			}
			return given[0]
		},
		"empty": empty,
		"quote": func(str ...interface{}) string {
			out := make([]string, 0, len(str))
			for _, s := range str {
				if s != nil {
					out = append(out, fmt.Sprintf("%q", strval(s)))
				}
			}
			return strings.Join(out, " ")
		},
		"toString": strval,
		"trunc": func(c int, s string) string {
			if c < 0 && len(s)+c > 0 {
				return s[len(s)+c:]
			}
			if c >= 0 && len(s) > c {
				return s[:c]
			}
			return s
		},
		"trimSuffix": func(a, b string) string { return strings.TrimSuffix(b, a) },
		"replace":    func(o, n, s string) string { return strings.Replace(s, o, n, -1) },
		"contains":   func(substr string, s string) bool { return strings.Contains(s, substr) },
		"indent":     indent,
		"nindent":    func(spaces int, v string) string { return "\n" + indent(spaces, v) },
		"b64enc":     func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
		"int": func(v interface{}) int { return int(toInt64(v)) },
		"add": func(i ...interface{}) int64 {
			var a int64
			for _, b := range i {
				a += toInt64(b)
			}
			return a
		},
		"sub":  func(a, b interface{}) int64 { return toInt64(a) - toInt64(b) },
		"ceil": func(a interface{}) float64 { return math.Ceil(toFloat64(a)) },
		"until": func(count int) []int {
			step := 1
			if count < 0 {
				step = -1
			}
			out := []int{}
			for i := 0; i != count; i += step {
				out = append(out, i)
			}
			return out
		},
		"hasKey": func(d map[string]interface{}, key string) bool { _, ok := d[key]; return ok },
		"dict": func(v ...interface{}) map[string]interface{} {
			d := map[string]interface{}{}
			for i := 0; i < len(v); i += 2 {
				if i+1 < len(v) {
					d[strval(v[i])] = v[i+1]
				} else {
					d[strval(v[i])] = ""
				}
			}
			return d
		},
		"upper":        strings.ToUpper,
		"randAlphaNum": randAlphaNum,
	}
}

// randAlphaNum: count characters drawn uniformly from [A-Za-z0-9] by crypto/rand, as Sprig's
// (Masterminds/goutils CryptoRandomAlphaNumeric).
func randAlphaNum(count int) (string, error) {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	if count < 0 {
		return "", fmt.Errorf("randAlphaNum: count %d is negative", count)
	}
	out := make([]byte, count)
	for i := range out {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(chars))))
		if err != nil {
			return "", err
		}
		out[i] = chars[n.Int64()]
	}
	return string(out), nil
}

func indent(spaces int, v string) string {
	pad := strings.Repeat(" ", spaces)
	return pad + strings.Replace(v, "\n", "\n"+pad, -1)
}

// strval, empty, toInt64 and toFloat64 follow Sprig (which converts with spf13/cast, where a
// value that does not convert becomes 0).
func strval(v interface{}) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case error:
		return v.Error()
	case fmt.Stringer:
		return v.String()
	default:
		return fmt.Sprintf("%v", v)
	}
}

func empty(given interface{}) bool {
	g := reflect.ValueOf(given)
	if !g.IsValid() {
		return true
	}
	switch g.Kind() {
	default:
		return g.IsNil()
	case reflect.Array, reflect.Slice, reflect.Map, reflect.String:
		return g.Len() == 0
	case reflect.Bool:
		return !g.Bool()
	case reflect.Complex64, reflect.Complex128:
		return g.Complex() == 0
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return g.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return g.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return g.Float() == 0
	case reflect.Struct:
		return false
	}
}

func toInt64(v interface{}) int64 {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case int32:
		return int64(v)
	case float64:
		return int64(v)
	case float32:
		return int64(v)
	case bool:
		if v {
			return 1
		}
		return 0
	case string:
		n, err := strconv.ParseInt(v, 0, 0)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}

func toFloat64(v interface{}) float64 {
	switch v := v.(type) {
	case float64:
		return v
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0
		}
		return f
	}
	return float64(toInt64(v))
}

// toYAML writes a value as block YAML the way Helm's toYaml does (keys sorted, lists under a
// key not indented further), ending in a newline. Strings are written plain when YAML would read
// them back as the same string, else in double quotes with JSON's escapes (valid YAML).
func toYAML(v interface{}) string {
	return strings.Join(yamlLines(v), "\n") + "\n"
}

func yamlLines(v interface{}) []string {
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			return []string{"{}"}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var out []string
		for _, k := range keys {
			child := yamlLines(x[k])
			key := yamlScalar(k)
			if !isBlock(x[k]) {
				out = append(out, key+": "+child[0])
				continue
			}
			out = append(out, key+":")
			_, isList := x[k].([]interface{})
			for _, l := range child {
				if isList {
					out = append(out, l)
				} else {
					out = append(out, "  "+l)
				}
			}
		}
		return out
	case []interface{}:
		if len(x) == 0 {
			return []string{"[]"}
		}
		var out []string
		for _, item := range x {
			child := yamlLines(item)
			out = append(out, "- "+child[0])
			for _, l := range child[1:] {
				out = append(out, "  "+l)
			}
		}
		return out
	default:
		return []string{yamlScalar(v)}
	}
}

// isBlock: a non-empty map or list, written on the lines below its key.
func isBlock(v interface{}) bool {
	switch x := v.(type) {
	case map[string]interface{}:
		return len(x) > 0
	case []interface{}:
		return len(x) > 0
	}
	return false
}

func yamlScalar(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int, int64, int32:
		return fmt.Sprintf("%d", x)
	case string:
		if plainSafe(x) {
			return x
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(x)
		return strings.TrimSuffix(buf.String(), "\n")
	default:
		return yamlScalar(strval(v))
	}
}

// plainSafe: letters, digits and a few punctuation marks that cannot start or change a YAML
// construct, and not a word or number YAML 1.1 would read as something else.
func plainSafe(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("_./-", r) || i > 0 && r == ' '
		if !ok {
			return false
		}
	}
	if strings.HasSuffix(s, " ") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, ".") {
		return false
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
		return false
	}
	if _, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil {
		return false
	}
	if _, err := strconv.ParseInt(s, 0, 64); err == nil {
		return false
	}
	return true
}
