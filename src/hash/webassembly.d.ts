// The WebAssembly JS API types ship only in TypeScript's DOM lib, which this Node project does not
// load. This is the subset hashgate uses (kernel loading, shared memories, globals), project-wide.
declare namespace WebAssembly {
  interface Module {}
  var Module: {
    prototype: Module;
    new (bytes: ArrayBufferView | ArrayBuffer): Module;
    exports(module: Module): ModuleExportDescriptor[];
    imports(module: Module): ModuleImportDescriptor[];
    customSections(module: Module, sectionName: string): ArrayBuffer[];
  };
  interface Instance {
    readonly exports: Exports;
  }
  var Instance: {
    prototype: Instance;
    new (module: Module, importObject?: Imports): Instance;
  };
  interface Memory {
    /** An ArrayBuffer, or a SharedArrayBuffer when the memory was created with `shared: true`. */
    readonly buffer: ArrayBuffer | SharedArrayBuffer;
    grow(deltaPages: number): number;
  }
  var Memory: {
    prototype: Memory;
    new (descriptor: MemoryDescriptor): Memory;
  };
  interface Global {
    value: any;
    valueOf(): any;
  }
  var Global: {
    prototype: Global;
    new (descriptor: { value: string; mutable?: boolean }, v?: unknown): Global;
  };
  interface Table {
    readonly length: number;
  }
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
    shared?: boolean;
  }
  type ImportExportKind = 'function' | 'global' | 'memory' | 'table';
  interface ModuleExportDescriptor {
    kind: ImportExportKind;
    name: string;
  }
  interface ModuleImportDescriptor {
    kind: ImportExportKind;
    module: string;
    name: string;
  }
  type ExportValue = Function | Global | Memory | Table;
  type Exports = Record<string, ExportValue>;
  type ImportValue = ExportValue | number | bigint;
  type Imports = Record<string, Record<string, ImportValue>>;
  interface CompileError extends Error {}
  var CompileError: { prototype: CompileError; new (message?: string): CompileError };
  interface LinkError extends Error {}
  var LinkError: { prototype: LinkError; new (message?: string): LinkError };
  interface RuntimeError extends Error {}
  var RuntimeError: { prototype: RuntimeError; new (message?: string): RuntimeError };
  function compile(bytes: ArrayBufferView | ArrayBuffer): Promise<Module>;
  function instantiate(module: Module, importObject?: Imports): Promise<Instance>;
  function validate(bytes: ArrayBufferView | ArrayBuffer): boolean;
}
