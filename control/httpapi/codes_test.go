package httpapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/kece-oj/kece/contracts"
)

// contractCodes reads the ErrorCode enum of one contract.
func contractCodes(t *testing.T, spec string) []string {
	t.Helper()
	raw, err := contracts.Specs.ReadFile(spec)
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Enum []string `yaml:"enum"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	codes := doc.Components.Schemas["ErrorCode"].Enum
	require.NotEmpty(t, codes, "%s has no ErrorCode enum", spec)
	return codes
}

// The table and the contracts' ErrorCode enums name the same codes for each
// surface, both ways.
func TestErrorCodesMatchContracts(t *testing.T) {
	t.Parallel()
	for sf, spec := range map[surface]string{surfaceMachine: "machine.yaml", surfaceAdmin: "admin.yaml", surfaceBusiness: "business.yaml"} {
		listed := contractCodes(t, spec)
		var ours []string
		for code, on := range errorCodes {
			if on.has(sf) {
				ours = append(ours, code)
			}
		}
		for _, c := range listed {
			require.Contains(t, ours, c, "%s lists %s but the table does not give it that surface", spec, c)
		}
		for _, c := range ours {
			require.Contains(t, listed, c, "the table answers %s on %s's surface, which its ErrorCode enum does not list", c, spec)
		}
	}
	// A code no contract lists never reaches a client; only CANCELLED
	// (the client went away) is such a code.
	for code, on := range errorCodes {
		if on == 0 {
			require.Equal(t, codeCancelled, code)
		}
	}
}

// Codes are named by their constants: no other file of this package spells
// one as a string literal, so the table above is the only place they live.
func TestErrorCodesSpelledOnce(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "codes.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil {
				_, isCode := errorCodes[s]
				require.False(t, isCode, "%s: code %s spelled as a literal; use its constant from codes.go", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
	require.Greater(t, checked, 5, "the package's files were not found")
}
