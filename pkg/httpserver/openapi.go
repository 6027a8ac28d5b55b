package httpserver

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"
	"go.yaml.in/yaml/v3"
)

// ServeOpenAPI serves a service's OpenAPI document at /openapi.yaml.
func ServeOpenAPI(e *gin.Engine, spec []byte) {
	e.GET("/openapi.yaml", func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=300")
		c.Data(http.StatusOK, "application/yaml", spec)
	})
}

// OperationsOf lists "METHOD /path" for every operation of an OpenAPI
// document, with {param} path templates.
func OperationsOf(spec []byte) ([]string, error) {
	var doc struct {
		OpenAPI string                            `yaml:"openapi"`
		Paths   map[string]map[string]interface{} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		return nil, fmt.Errorf("openapi: version %q, want 3.1.x", doc.OpenAPI)
	}
	var ops []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				ops = append(ops, strings.ToUpper(method)+" "+path)
			}
		}
	}
	sort.Strings(ops)
	return ops, nil
}

// RoutesOf lists "METHOD /path" for every route registered on e, with gin's
// :param written as {param}.
func RoutesOf(e *gin.Engine) []string {
	var out []string
	for _, r := range e.Routes() {
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") || strings.HasPrefix(p, "*") {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		out = append(out, r.Method+" "+strings.Join(parts, "/"))
	}
	sort.Strings(out)
	return out
}
