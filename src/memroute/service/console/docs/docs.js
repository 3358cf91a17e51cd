// The API docs page: Swagger UI over this service's own /openapi.json. A file, not an inline script, so the
// page keeps the console's content security policy; no validator badge (it would call another origin).
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  validatorUrl: null,
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
