export * from './errors.js';
export * from './validate.js';
export * from './limits.js';
export * from './requests.js';
export * from './results.js';
export * from './engine.js';
export * from './subjects.js';
export * from './jobs.js';
