// helm-render: a stand-in for `helm template` where Helm itself cannot be installed (no network).
// It renders a chart with Go's text/template and the sprig function library, as Helm does, and
// implements the part of Helm the Shoal chart uses: values.yaml deep-merged with -f overlays (a
// null removes a key), .Release, .Chart, .Capabilities (KubeVersion, APIVersions.Has), .Template,
// .Files.Get, and Helm's own functions include, tpl, required, toYaml, fromYaml, toJson, lookup
// (always empty: there is no cluster). Named templates from every file are shared; files whose
// name starts with "_" are parsed but not rendered, like Helm. It is NOT Helm: no hooks ordering,
// no subcharts, no schema validation (the tests validate values.schema.json with ajv), no --set.
//
// Build offline against Debian's packages (golang-go, golang-github-masterminds-sprig-dev):
//   GO111MODULE=off GOPATH=/usr/share/gocode go build -o /tmp/helm-render ./deploy/tools/helm-render
// Use:
//   /tmp/helm-render --chart deploy/helm/shoal -f deploy/helm/shoal/values-laptop.yaml \
//       --release shoal --namespace shoal [--values-out merged.json]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	yaml "gopkg.in/yaml.v2"
)

type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

// APIVersions answers .Capabilities.APIVersions.Has like Helm's VersionSet.
type APIVersions []string

func (a APIVersions) Has(version string) bool {
	for _, v := range a {
		if v == version {
			return true
		}
	}
	return false
}

// Files gives templates the chart's non-template files (.Files.Get).
type Files struct{ root string }

func (f Files) Get(name string) string {
	data, err := os.ReadFile(filepath.Join(f.root, filepath.FromSlash(name)))
	if err != nil {
		return ""
	}
	return string(data)
}

// normalize turns yaml.v2's map[interface{}]interface{} into map[string]interface{} throughout.
func normalize(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, val := range t {
			out[fmt.Sprint(k)] = normalize(val)
		}
		return out
	case map[string]interface{}:
		for k, val := range t {
			t[k] = normalize(val)
		}
		return t
	case []interface{}:
		for i, val := range t {
			t[i] = normalize(val)
		}
		return t
	default:
		return v
	}
}

func readYamlMap(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	m, ok := normalize(raw).(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("%s: the top level is not a map", path)
	}
	return m, nil
}

// merge overlays src on dst as Helm merges -f files: maps merge key by key, anything else
// replaces, and null deletes the key.
func merge(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

func toYaml(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYaml(s string) map[string]interface{} {
	var raw interface{}
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	m, _ := normalize(raw).(map[string]interface{})
	if m == nil {
		m = map[string]interface{}{}
	}
	return m
}

func main() {
	var files valueFiles
	chartDir := flag.String("chart", "", "chart folder")
	release := flag.String("release", "shoal", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kubeVersion := flag.String("kube-version", "v1.32.0", "Kubernetes version for .Capabilities")
	apiVersions := flag.String("api-versions", "", "extra API versions .Capabilities.APIVersions.Has answers true for, comma-separated")
	valuesOut := flag.String("values-out", "", "also write the merged values as JSON to this file")
	flag.Var(&files, "f", "values file (repeatable, later wins)")
	flag.Parse()
	if *chartDir == "" {
		fmt.Fprintln(os.Stderr, "helm-render: --chart is required")
		os.Exit(2)
	}
	if err := run(*chartDir, files, *release, *namespace, *kubeVersion, *apiVersions, *valuesOut); err != nil {
		fmt.Fprintf(os.Stderr, "helm-render: %v\n", err)
		os.Exit(1)
	}
}

func run(chartDir string, files []string, release, namespace, kubeVersion, extraAPIs, valuesOut string) error {
	chart, err := readYamlMap(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	values, err := readYamlMap(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		overlay, err := readYamlMap(f)
		if err != nil {
			return err
		}
		values = merge(values, overlay)
	}
	if valuesOut != "" {
		data, err := json.MarshalIndent(values, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(valuesOut, data, 0o644); err != nil {
			return err
		}
	}
	chartName := fmt.Sprint(chart["name"])
	// Helm exposes Chart.yaml fields with capitalised names.
	chartData := map[string]interface{}{}
	for k, v := range chart {
		chartData[strings.ToUpper(k[:1])+k[1:]] = v
	}
	version := strings.TrimPrefix(kubeVersion, "v")
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return fmt.Errorf("--kube-version %q is not vMAJOR.MINOR.PATCH", kubeVersion)
	}
	apis := APIVersions{"v1", "apps/v1", "batch/v1", "policy/v1", "autoscaling/v2", "networking.k8s.io/v1", "rbac.authorization.k8s.io/v1"}
	for _, a := range strings.Split(extraAPIs, ",") {
		if strings.TrimSpace(a) != "" {
			apis = append(apis, strings.TrimSpace(a))
		}
	}
	capabilities := map[string]interface{}{
		"KubeVersion": map[string]interface{}{"Version": kubeVersion, "Major": parts[0], "Minor": parts[1], "GitVersion": kubeVersion},
		"APIVersions": apis,
	}
	releaseData := map[string]interface{}{"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1}

	root := template.New("chart").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includeDepth := 0
	funcs["include"] = func(name string, data interface{}) (string, error) {
		includeDepth++
		defer func() { includeDepth-- }()
		if includeDepth > 100 {
			return "", errors.New("include: recursion deeper than 100")
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	funcs["required"] = func(message string, value interface{}) (interface{}, error) {
		if value == nil {
			return nil, errors.New(message)
		}
		if s, ok := value.(string); ok && s == "" {
			return nil, errors.New(message)
		}
		return value, nil
	}
	funcs["toYaml"] = toYaml
	funcs["fromYaml"] = fromYaml
	funcs["lookup"] = func(string, string, string, string) map[string]interface{} { return map[string]interface{}{} }
	root.Funcs(funcs)

	templateDir := filepath.Join(chartDir, "templates")
	entries, err := os.ReadDir(templateDir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		if !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".tpl") && !strings.HasSuffix(name, ".txt") {
			continue
		}
		text, err := os.ReadFile(filepath.Join(templateDir, name))
		if err != nil {
			return err
		}
		full := chartName + "/templates/" + name
		if _, err := root.New(full).Parse(string(text)); err != nil {
			return err
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var out bytes.Buffer
	for _, name := range names {
		if strings.HasPrefix(name, "_") || strings.HasSuffix(name, ".txt") {
			continue
		}
		full := chartName + "/templates/" + name
		data := map[string]interface{}{
			"Values":       values,
			"Release":      releaseData,
			"Chart":        chartData,
			"Capabilities": capabilities,
			"Template":     map[string]interface{}{"Name": full, "BasePath": chartName + "/templates"},
			"Files":        Files{root: chartDir},
		}
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, full, data); err != nil {
			return err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if strings.TrimSpace(text) == "" {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", full, strings.TrimSpace(text))
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}
