package httpapi

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/waitingroom/waitingroom/pkg/auth"
	"github.com/waitingroom/waitingroom/pkg/httpserver"
	"github.com/waitingroom/waitingroom/pkg/problem"
)

const devTokenTTL = 12 * time.Hour

type devTokenRequest struct {
	UserID string `json:"userId"`
	Role   string `json:"role"`
}

// devToken mints a JWT for any user id. Registered only in AUTH_DEV_MODE.
func (h *handler) devToken(c *gin.Context) {
	body, ok := h.readJSON(c)
	if !ok {
		return
	}
	var req devTokenRequest
	if err := httpserver.DecodeStrict(body, &req); err != nil {
		msg := "the body must be {\"userId\": \"...\", \"role\": \"admin\"?}: " + err.Error()
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeBadRequest, msg))
		return
	}
	var bad []problem.FieldError
	if !auth.ValidUserID(req.UserID) {
		bad = append(bad, problem.FieldError{Field: "userId", Message: "must match ^[A-Za-z0-9_.:@|-]{1,128}$"})
	}
	if req.Role != "" && req.Role != auth.RoleAdmin {
		bad = append(bad, problem.FieldError{Field: "role", Message: `must be "admin" or absent`})
	}
	if len(bad) > 0 {
		problem.Write(c.Writer, c.Request, problem.New(http.StatusBadRequest, problem.TypeValidation, "invalid token request").WithErrors(bad))
		return
	}
	tok, err := h.ver.Mint(req.UserID, req.Role, devTokenTTL)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"token": tok, "expiresAt": time.Now().Add(devTokenTTL).UTC().Format(time.RFC3339)})
}
