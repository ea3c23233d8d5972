// The API reference at /docs, drawn from /openapi.json with nothing but this file: no script, style or font
// from anywhere else, so the page works on a cluster without internet. Every text from the schema is set
// with textContent (never parsed as HTML).
"use strict";
(function () {
  const app = document.getElementById("app");

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function resolve(spec, schema, depth) {
    if (!schema || depth > 8) return schema || {};
    if (schema.$ref) {
      const name = schema.$ref.split("/").pop();
      return Object.assign({ title: name }, resolve(spec, (spec.components.schemas || {})[name], depth + 1));
    }
    return schema;
  }

  function typeOf(spec, schema, depth) {
    schema = resolve(spec, schema, depth || 0);
    if (schema.anyOf || schema.oneOf) return (schema.anyOf || schema.oneOf).map((s) => typeOf(spec, s, (depth || 0) + 1)).join(" | ");
    if (schema.type === "array") return typeOf(spec, schema.items || {}, (depth || 0) + 1) + "[]";
    if (schema.title && schema.properties) return schema.title;
    return schema.type || schema.title || "any";
  }

  function schemaTable(spec, schema) {
    schema = resolve(spec, schema, 0);
    if (!schema.properties) return el("p", { class: "muted" }, typeOf(spec, schema));
    const required = new Set(schema.required || []);
    const rows = Object.entries(schema.properties).map(([name, prop]) => {
      const p = resolve(spec, prop, 0);
      return el("tr", {}, el("td", { class: "path" }, name + (required.has(name) ? " *" : "")),
        el("td", {}, typeOf(spec, prop)), el("td", {}, p.description || ""));
    });
    return el("table", {}, el("tr", {}, el("th", {}, "field"), el("th", {}, "type"), el("th", {}, "meaning")), ...rows);
  }

  function operation(spec, path, method, op) {
    const body = el("div", {});
    if (op.description) body.append(el("p", {}, op.description));
    const params = op.parameters || [];
    if (params.length) {
      body.append(el("h4", {}, "Parameters"), el("table", {},
        el("tr", {}, el("th", {}, "name"), el("th", {}, "in"), el("th", {}, "type"), el("th", {}, "meaning")),
        ...params.map((p) => el("tr", {}, el("td", { class: "path" }, p.name + (p.required ? " *" : "")),
          el("td", {}, p.in), el("td", {}, typeOf(spec, p.schema || {})), el("td", {}, p.description || "")))));
    }
    const request = op.requestBody && op.requestBody.content && op.requestBody.content["application/json"];
    if (request) body.append(el("h4", {}, "Body (JSON)"), schemaTable(spec, request.schema));
    const responses = Object.entries(op.responses || {});
    if (responses.length) {
      body.append(el("h4", {}, "Answers"), el("table", {},
        ...responses.map(([code, r]) => {
          const content = r.content || {};
          const media = Object.keys(content)[0];
          const shape = media && content[media].schema ? typeOf(spec, content[media].schema) : "";
          return el("tr", {}, el("td", {}, code), el("td", {}, r.description || ""), el("td", {}, media ? media + " " + shape : ""));
        })));
    }
    const secured = (op.security || spec.security || []).length > 0;
    return el("details", { class: "op", id: (op.operationId || method + path) },
      el("summary", {}, el("span", { class: "method " + method }, method), " ",
        el("span", { class: "path" }, path), "  ", el("span", { class: "muted" }, (op.summary || "") + (secured ? "  (token)" : ""))),
      body);
  }

  function draw(spec) {
    document.title = (spec.info.title || "API") + " " + (spec.info.version || "");
    document.getElementById("title").textContent = document.title;
    app.replaceChildren();
    if (spec.info.description) app.append(el("p", {}, spec.info.description));
    app.append(el("p", { class: "muted" }, "Every route but /healthz needs Authorization: Bearer <token>. Errors are JSON: error, field, detail."));
    const byTag = new Map();
    for (const [path, item] of Object.entries(spec.paths || {})) {
      for (const [method, op] of Object.entries(item)) {
        if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
        const tag = (op.tags || ["other"])[0];
        if (!byTag.has(tag)) byTag.set(tag, []);
        byTag.get(tag).push(operation(spec, path, method, op));
      }
    }
    for (const [tag, ops] of byTag) app.append(el("h2", {}, tag), ...ops);
    const schemas = Object.entries((spec.components || {}).schemas || {});
    if (schemas.length) {
      app.append(el("h2", {}, "schemas"), ...schemas.map(([name, s]) =>
        el("details", { class: "op", id: "schema-" + name }, el("summary", {}, el("span", { class: "path" }, name)),
          s.description ? el("p", {}, s.description) : null, schemaTable(spec, s))));
    }
  }

  fetch("/openapi.json").then((r) => {
    if (!r.ok) throw new Error("/openapi.json answered " + r.status);
    return r.json();
  }).then(draw).catch((e) => { app.replaceChildren(el("p", {}, "cannot load the API schema: " + e.message)); });
})();
