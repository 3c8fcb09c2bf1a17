import type { ErrorObject, ValidateFunction } from 'ajv'
import * as generated from '../generated/validators.js'
import { schemas } from '../generated/schemas.js'

/** Typed access to the validators precompiled from schemas/ (see scripts/build-validators.ts). Never compiled here. */
export type SchemaId = keyof typeof schemas

export function validatorFor(id: SchemaId): ValidateFunction {
  const name = 'validate_' + id.replace(/[^A-Za-z0-9]+/g, '_')
  const fn = (generated as unknown as Record<string, ValidateFunction | undefined>)[name]
  if (!fn) throw new Error(`no generated validator for ${id}; run npm run build:validators`)
  return fn
}

/** The schema document as published (tools/list), without its internal $id. */
export function schemaDocument(id: SchemaId): Record<string, unknown> {
  const { $id: _id, ...doc } = schemas[id] as Record<string, unknown>
  return doc
}

export interface ValidationDetail {
  path: string
  message: string
}

export function validationDetails(errors: ErrorObject[] | null | undefined): ValidationDetail[] {
  return (errors ?? []).slice(0, 10).map((e) => {
    let path = e.instancePath || '/'
    if (e.keyword === 'required') path = `${e.instancePath}/${String((e.params as { missingProperty: string }).missingProperty)}`
    if (e.keyword === 'additionalProperties') path = `${e.instancePath}/${String((e.params as { additionalProperty: string }).additionalProperty)}`
    const message = e.keyword === 'additionalProperties' ? 'is not allowed' : e.keyword === 'required' ? 'is required' : e.message ?? 'is invalid'
    return { path, message }
  })
}

/** One readable sentence from validation details, e.g. `/limit must be <= 100; /foo is not allowed`. */
export function describeDetails(details: ValidationDetail[]): string {
  return details.map((d) => `${d.path} ${d.message}`).join('; ')
}
