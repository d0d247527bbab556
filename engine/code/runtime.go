package code

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"

	"github.com/kece-oj/kece/engine"
)

// recipes are the package lists deploy/images/build-local.sh installs; the
// image tag is a hash of base||<pool>, computed here and in the script alike.
//
//go:embed recipes
var recipes embed.FS

// ImageTag returns the local image reference kece/runtime-<pool>:<recipe-hash>
// that deploy/images/build-local.sh builds for pool.
func ImageTag(pool string) (string, error) {
	base, err := recipes.ReadFile("recipes/base")
	if err != nil {
		return "", fmt.Errorf("recipe base: %w", err)
	}
	p, err := recipes.ReadFile("recipes/" + pool)
	if err != nil || pool == "base" {
		return "", fmt.Errorf("no image recipe for pool %q", pool)
	}
	sum := sha256.Sum256(append(append([]byte{}, base...), p...))
	return "kece/runtime-" + pool + ":" + hex.EncodeToString(sum[:])[:12], nil
}

// DefaultRuntime returns the spec of the pool's default language (see
// DefaultLanguage) for the locally built image.
func DefaultRuntime(pool string) (engine.RuntimeSpec, error) {
	lang, ok := defaultLanguage[pool]
	if !ok {
		return engine.RuntimeSpec{}, fmt.Errorf("no default runtime for pool %q", pool)
	}
	return RuntimeForLanguage(lang)
}
