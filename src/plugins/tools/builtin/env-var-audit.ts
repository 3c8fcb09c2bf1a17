/** Where an env var tool's audit entries point: the variable, never its value. */
export const envVarAudit = {
  auditSubject: (args: { app_id: string; name: string }) => ({ targetType: 'env_var', targetId: `${args.app_id}/${args.name}` }),
  auditTarget: (_args: unknown, output: { app_id: string; name: string; created: boolean }) =>
    ({ targetType: 'env_var', targetId: `${output.app_id}/${output.name}`, details: { created: output.created } }),
}
