package httpapi

import (
	"bytes"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/kece-oj/kece/contracts"
)

// API docs: the three OpenAPI specs as written (/openapi/<surface>.yaml)
// and a human page per spec rendered from them here, server-side, with no
// script, font or stylesheet from elsewhere (/docs/). They are public: the
// specs are the published contract, identical to contracts/*.yaml in the
// source, and hold no data of this deployment (no hosts, ids or tokens), so
// a token would protect nothing while keeping browsers out. Operators who
// still want them hidden set Config.DisableAPIDocs (KECE_API_DOCS=0).

// apiDoc is one rendered spec.
type apiDoc struct {
	surface string // admin, business, machine
	yaml    []byte
	html    []byte
}

// renderedAPIDocs renders the embedded specs once per process: they are
// compiled in, so every server of the process shares the same pages.
var renderedAPIDocs = sync.OnceValues(loadAPIDocs)

// loadAPIDocs reads and renders the embedded specs.
func loadAPIDocs() ([]apiDoc, error) {
	var out []apiDoc
	for _, name := range contracts.SpecNames() {
		raw, err := contracts.Specs.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("api docs: %w", err)
		}
		doc, err := openapi3.NewLoader().LoadFromData(raw)
		if err != nil {
			return nil, fmt.Errorf("api docs: %s: %w", name, err)
		}
		surface := strings.TrimSuffix(name, ".yaml")
		page, err := renderAPIDoc(surface, doc)
		if err != nil {
			return nil, fmt.Errorf("api docs: %s: %w", name, err)
		}
		out = append(out, apiDoc{surface: surface, yaml: raw, html: page})
	}
	return out, nil
}

// mountAPIDocs adds /openapi/ and /docs/ to root.
func mountAPIDocs(root *http.ServeMux, docs []apiDoc) {
	index := renderDocsIndex(docs)
	for _, d := range docs {
		root.HandleFunc("GET /openapi/"+d.surface+".yaml", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			_, _ = w.Write(d.yaml)
		})
		root.HandleFunc("GET /docs/"+d.surface, func(w http.ResponseWriter, _ *http.Request) { writeDocPage(w, d.html) })
	}
	root.HandleFunc("GET /docs/{$}", func(w http.ResponseWriter, _ *http.Request) { writeDocPage(w, index) })
	root.HandleFunc("GET /docs", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/docs/", http.StatusMovedPermanently)
	})
}

func writeDocPage(w http.ResponseWriter, page []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Inline styles only; nothing is loaded from anywhere.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write(page)
}

// Views for the templates.
type (
	docPage struct {
		Surface, Title, Version, Description string
		Servers                              []string
		Security                             []string
		Operations                           []docOperation
		Schemas                              []docSchema
	}
	docOperation struct {
		Method, Path, ID, Summary, Description string
		Tags, Security                         []string
		Params                                 []docField
		Body                                   []docField // one per content type
		Responses                              []docField
	}
	docSchema struct {
		Name, Type, Description string
		Enum                    []string
		Props                   []docField
	}
	docField struct {
		Name, In, Type, Description string
		Required                    bool
	}
)

func renderAPIDoc(surface string, doc *openapi3.T) ([]byte, error) {
	p := docPage{Surface: surface, Title: doc.Info.Title, Version: doc.Info.Version, Description: doc.Info.Description}
	for _, s := range doc.Servers {
		p.Servers = append(p.Servers, s.URL)
	}
	p.Security = securityNames(doc.Security)
	paths := doc.Paths.Map()
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		item := paths[path]
		ops := item.Operations()
		for _, method := range []string{"GET", "PUT", "POST", "DELETE", "PATCH", "HEAD", "OPTIONS"} {
			op := ops[method]
			if op == nil {
				continue
			}
			o := docOperation{Method: method, Path: path, ID: op.OperationID, Summary: op.Summary, Description: op.Description, Tags: op.Tags}
			if op.Security != nil {
				o.Security = securityNames(*op.Security)
				if len(o.Security) == 0 {
					o.Security = []string{"none (public)"}
				}
			}
			for _, pr := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if pr == nil || pr.Value == nil {
					continue
				}
				o.Params = append(o.Params, docField{Name: pr.Value.Name, In: pr.Value.In, Required: pr.Value.Required,
					Type: schemaType(pr.Value.Schema), Description: pr.Value.Description})
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				rb := op.RequestBody.Value
				for _, ct := range slices.Sorted(maps.Keys(rb.Content)) {
					o.Body = append(o.Body, docField{Name: ct, Required: rb.Required, Type: schemaType(rb.Content[ct].Schema), Description: rb.Description})
				}
			}
			if op.Responses != nil {
				rs := op.Responses.Map()
				for _, code := range slices.Sorted(maps.Keys(rs)) {
					r := rs[code]
					f := docField{Name: code}
					if r.Value != nil {
						if r.Value.Description != nil {
							f.Description = *r.Value.Description
						}
						var types []string
						for _, ct := range slices.Sorted(maps.Keys(r.Value.Content)) {
							types = append(types, ct+": "+schemaType(r.Value.Content[ct].Schema))
						}
						f.Type = strings.Join(types, "; ")
					}
					o.Responses = append(o.Responses, f)
				}
			}
			p.Operations = append(p.Operations, o)
		}
	}
	if doc.Components != nil {
		for _, name := range slices.Sorted(maps.Keys(doc.Components.Schemas)) {
			ref := doc.Components.Schemas[name]
			if ref == nil || ref.Value == nil {
				continue
			}
			s := ref.Value
			ds := docSchema{Name: name, Type: schemaType(&openapi3.SchemaRef{Value: s}), Description: s.Description}
			for _, e := range s.Enum {
				ds.Enum = append(ds.Enum, fmt.Sprint(e))
			}
			for _, prop := range slices.Sorted(maps.Keys(s.Properties)) {
				pr := s.Properties[prop]
				desc := ""
				if pr.Value != nil {
					desc = pr.Value.Description
				}
				ds.Props = append(ds.Props, docField{Name: prop, Type: schemaType(pr), Required: slices.Contains(s.Required, prop), Description: desc})
			}
			p.Schemas = append(p.Schemas, ds)
		}
	}
	var b bytes.Buffer
	if err := docTemplate.ExecuteTemplate(&b, "page", p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func renderDocsIndex(docs []apiDoc) []byte {
	var b bytes.Buffer
	surfaces := make([]string, 0, len(docs))
	for _, d := range docs {
		surfaces = append(surfaces, d.surface)
	}
	if err := docTemplate.ExecuteTemplate(&b, "index", surfaces); err != nil {
		// The template is fixed and its data is a list of names.
		panic(err)
	}
	return b.Bytes()
}

func securityNames(reqs openapi3.SecurityRequirements) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, slices.Sorted(maps.Keys(r))...)
	}
	return out
}

// schemaType renders a schema reference in a few words: a component name
// (linked by the template), "array of X", or the type with its format and
// enum values.
func schemaType(ref *openapi3.SchemaRef) string {
	if ref == nil {
		return ""
	}
	if ref.Ref != "" {
		return "→" + ref.Ref[strings.LastIndex(ref.Ref, "/")+1:]
	}
	s := ref.Value
	if s == nil {
		return ""
	}
	switch {
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		var alts []string
		for _, a := range append(slices.Clone(s.OneOf), s.AnyOf...) {
			alts = append(alts, schemaType(a))
		}
		return "one of " + strings.Join(alts, " | ")
	case len(s.AllOf) > 0:
		var alts []string
		for _, a := range s.AllOf {
			alts = append(alts, schemaType(a))
		}
		return strings.Join(alts, " & ")
	case s.Type.Is("array"):
		return "array of " + schemaType(s.Items)
	}
	t := strings.Join(s.Type.Slice(), "|")
	if t == "" {
		t = "any"
	}
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	if len(s.Enum) > 0 {
		var vs []string
		for _, e := range s.Enum {
			vs = append(vs, fmt.Sprint(e))
		}
		t += ": " + strings.Join(vs, ", ")
	}
	if s.Pattern != "" {
		t += " matching " + s.Pattern
	}
	return t
}

// typeHTML links "→Name" to the schema's anchor.
func typeHTML(t string) template.HTML {
	var b strings.Builder
	for i, part := range strings.Split(t, "→") {
		if i == 0 {
			b.WriteString(template.HTMLEscapeString(part))
			continue
		}
		end := strings.IndexFunc(part, func(r rune) bool {
			return !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		})
		if end < 0 {
			end = len(part)
		}
		name := part[:end]
		fmt.Fprintf(&b, `<a href="#schema-%s">%s</a>%s`, template.HTMLEscapeString(name), template.HTMLEscapeString(name),
			template.HTMLEscapeString(part[end:]))
	}
	return template.HTML(b.String()) // every piece is escaped above
}

var docTemplate = template.Must(template.New("docs").Funcs(template.FuncMap{
	"type":  typeHTML,
	"lower": strings.ToLower,
}).Parse(`{{define "style"}}<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#222}
code,pre,.path{font-family:ui-monospace,monospace}
.md{white-space:pre-wrap}
.op{border:1px solid #ccc;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
.m{display:inline-block;min-width:4.5rem;font-weight:bold;font-family:ui-monospace,monospace}
.get{color:#07a}.post{color:#080}.put{color:#a60}.delete{color:#b00}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}
nav a{margin-right:1rem}
</style>{{end}}
{{define "index"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><title>KECE API docs</title>{{template "style"}}</head><body>
<h1>KECE API docs</h1>
<p>Rendered from the OpenAPI specifications this control plane serves.</p>
<ul>{{range .}}<li><a href="/docs/{{.}}">{{.}} API</a> — spec: <a href="/openapi/{{.}}.yaml">/openapi/{{.}}.yaml</a></li>{{end}}</ul>
</body></html>{{end}}
{{define "page"}}<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>{{template "style"}}</head><body>
<nav><a href="/docs/">all APIs</a><a href="/openapi/{{.Surface}}.yaml">{{.Surface}}.yaml</a><a href="#operations">operations</a><a href="#schemas">schemas</a></nav>
<h1>{{.Title}} <small>version {{.Version}}</small></h1>
{{if .Security}}<p>Authentication: {{range .Security}}<code>{{.}}</code> {{end}}</p>{{end}}
<div class="md">{{.Description}}</div>
<h2 id="operations">Operations</h2>
<table><tr><th>method</th><th>path</th><th>summary</th></tr>
{{range .Operations}}<tr><td class="m {{lower .Method}}">{{.Method}}</td><td class="path"><a href="#op-{{.ID}}">{{.Path}}</a></td><td>{{.Summary}}</td></tr>
{{end}}</table>
{{range .Operations}}<div class="op" id="op-{{.ID}}">
<h3><span class="m {{lower .Method}}">{{.Method}}</span> <span class="path">{{.Path}}</span></h3>
<p><code>{{.ID}}</code>{{if .Tags}} · {{range .Tags}}{{.}} {{end}}{{end}}{{if .Security}} · auth: {{range .Security}}{{.}} {{end}}{{end}}</p>
{{if .Summary}}<p><b>{{.Summary}}</b></p>{{end}}
{{if .Description}}<div class="md">{{.Description}}</div>{{end}}
{{if .Params}}<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>type</th><th>required</th><th>description</th></tr>
{{range .Params}}<tr><td><code>{{.Name}}</code></td><td>{{.In}}</td><td>{{type .Type}}</td><td>{{if .Required}}yes{{end}}</td><td class="md">{{.Description}}</td></tr>{{end}}</table>{{end}}
{{if .Body}}<h4>Request body</h4><table><tr><th>content type</th><th>schema</th><th>required</th></tr>
{{range .Body}}<tr><td><code>{{.Name}}</code></td><td>{{type .Type}}</td><td>{{if .Required}}yes{{end}}</td></tr>{{end}}</table>{{end}}
{{if .Responses}}<h4>Responses</h4><table><tr><th>status</th><th>description</th><th>body</th></tr>
{{range .Responses}}<tr><td>{{.Name}}</td><td class="md">{{.Description}}</td><td>{{type .Type}}</td></tr>{{end}}</table>{{end}}
</div>{{end}}
<h2 id="schemas">Schemas</h2>
{{range .Schemas}}<div class="op" id="schema-{{.Name}}"><h3>{{.Name}}</h3><p>{{type .Type}}</p>
{{if .Description}}<div class="md">{{.Description}}</div>{{end}}
{{if .Props}}<table><tr><th>property</th><th>type</th><th>required</th><th>description</th></tr>
{{range .Props}}<tr><td><code>{{.Name}}</code></td><td>{{type .Type}}</td><td>{{if .Required}}yes{{end}}</td><td class="md">{{.Description}}</td></tr>{{end}}</table>{{end}}
</div>{{end}}
</body></html>{{end}}`))
