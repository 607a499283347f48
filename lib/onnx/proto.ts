/**
 * The part of the ONNX protobuf schema (onnx/onnx.proto3) an exported model uses, declared with protobufjs's
 * reflection API: a model, its graph, nodes, attributes, tensors, typed inputs and outputs with symbolic
 * dimensions, opset imports and metadata. Field numbers are those of the ONNX specification; fields this code
 * never writes (sparse tensors, functions, training info, …) are left out, and a decoder skips them.
 */
import * as protobuf from "protobufjs/light.js";

/** TensorProto.DataType values used here. */
export const DataType = { FLOAT: 1, INT32: 6, INT64: 7, BOOL: 9 } as const;

/** AttributeProto.AttributeType values. */
export const AttributeType = {
  UNDEFINED: 0,
  FLOAT: 1,
  INT: 2,
  STRING: 3,
  TENSOR: 4,
  GRAPH: 5,
  FLOATS: 6,
  INTS: 7,
  STRINGS: 8,
  TENSORS: 9,
  GRAPHS: 10,
} as const;

const schema = {
  nested: {
    onnx: {
      nested: {
        AttributeProto: {
          fields: {
            name: { type: "string", id: 1 },
            refAttrName: { type: "string", id: 21 },
            docString: { type: "string", id: 13 },
            type: { type: "int32", id: 20 },
            f: { type: "float", id: 2 },
            i: { type: "int64", id: 3 },
            s: { type: "bytes", id: 4 },
            t: { type: "TensorProto", id: 5 },
            g: { type: "GraphProto", id: 6 },
            floats: { rule: "repeated", type: "float", id: 7 },
            ints: { rule: "repeated", type: "int64", id: 8 },
            strings: { rule: "repeated", type: "bytes", id: 9 },
            tensors: { rule: "repeated", type: "TensorProto", id: 10 },
            graphs: { rule: "repeated", type: "GraphProto", id: 11 },
          },
        },
        ValueInfoProto: {
          fields: {
            name: { type: "string", id: 1 },
            type: { type: "TypeProto", id: 2 },
            docString: { type: "string", id: 3 },
          },
        },
        NodeProto: {
          fields: {
            input: { rule: "repeated", type: "string", id: 1 },
            output: { rule: "repeated", type: "string", id: 2 },
            name: { type: "string", id: 3 },
            opType: { type: "string", id: 4 },
            domain: { type: "string", id: 7 },
            attribute: { rule: "repeated", type: "AttributeProto", id: 5 },
            docString: { type: "string", id: 6 },
          },
        },
        StringStringEntryProto: {
          fields: {
            key: { type: "string", id: 1 },
            value: { type: "string", id: 2 },
          },
        },
        OperatorSetIdProto: {
          fields: {
            domain: { type: "string", id: 1 },
            version: { type: "int64", id: 2 },
          },
        },
        ModelProto: {
          fields: {
            irVersion: { type: "int64", id: 1 },
            opsetImport: { rule: "repeated", type: "OperatorSetIdProto", id: 8 },
            producerName: { type: "string", id: 2 },
            producerVersion: { type: "string", id: 3 },
            domain: { type: "string", id: 4 },
            modelVersion: { type: "int64", id: 5 },
            docString: { type: "string", id: 6 },
            graph: { type: "GraphProto", id: 7 },
            metadataProps: { rule: "repeated", type: "StringStringEntryProto", id: 14 },
          },
        },
        GraphProto: {
          fields: {
            node: { rule: "repeated", type: "NodeProto", id: 1 },
            name: { type: "string", id: 2 },
            initializer: { rule: "repeated", type: "TensorProto", id: 5 },
            docString: { type: "string", id: 10 },
            input: { rule: "repeated", type: "ValueInfoProto", id: 11 },
            output: { rule: "repeated", type: "ValueInfoProto", id: 12 },
            valueInfo: { rule: "repeated", type: "ValueInfoProto", id: 13 },
          },
        },
        TensorProto: {
          fields: {
            dims: { rule: "repeated", type: "int64", id: 1 },
            dataType: { type: "int32", id: 2 },
            floatData: { rule: "repeated", type: "float", id: 4 },
            int32Data: { rule: "repeated", type: "int32", id: 5 },
            int64Data: { rule: "repeated", type: "int64", id: 7 },
            name: { type: "string", id: 8 },
            docString: { type: "string", id: 12 },
            rawData: { type: "bytes", id: 9 },
          },
        },
        TensorShapeProto: {
          fields: {
            dim: { rule: "repeated", type: "Dimension", id: 1 },
          },
          nested: {
            Dimension: {
              oneofs: { value: { oneof: ["dimValue", "dimParam"] } },
              fields: {
                dimValue: { type: "int64", id: 1 },
                dimParam: { type: "string", id: 2 },
                denotation: { type: "string", id: 3 },
              },
            },
          },
        },
        TypeProto: {
          oneofs: { value: { oneof: ["tensorType"] } },
          fields: {
            tensorType: { type: "Tensor", id: 1 },
            denotation: { type: "string", id: 6 },
          },
          nested: {
            Tensor: {
              fields: {
                elemType: { type: "int32", id: 1 },
                shape: { type: "TensorShapeProto", id: 2 },
              },
            },
          },
        },
      },
    },
  },
};

const root = protobuf.Root.fromJSON(schema);
const ModelProtoType = root.lookupType("onnx.ModelProto");

// ---- the plain objects this module encodes and decodes (protobufjs's camel-case field names) ----

/** An int64 as protobufjs hands it back without the `long` package: a number (exact below 2^53). */
type Int64 = number;

export interface TensorProto {
  name?: string;
  dims?: Int64[];
  dataType?: number;
  rawData?: Uint8Array;
  floatData?: number[];
  int32Data?: number[];
  int64Data?: Int64[];
  docString?: string;
}

export interface AttributeProto {
  name: string;
  type: number;
  f?: number;
  i?: Int64;
  s?: Uint8Array;
  t?: TensorProto;
  floats?: number[];
  ints?: Int64[];
  strings?: Uint8Array[];
}

export interface NodeProto {
  input: string[];
  output: string[];
  name?: string;
  opType: string;
  domain?: string;
  attribute?: AttributeProto[];
  docString?: string;
}

/** One dimension: a fixed size or a symbolic name (batch, seq, …). */
export type Dimension = { dimValue: Int64 } | { dimParam: string };

export interface ValueInfoProto {
  name: string;
  type: { tensorType: { elemType: number; shape: { dim: Dimension[] } } };
  docString?: string;
}

interface GraphProto {
  name?: string;
  node: NodeProto[];
  initializer: TensorProto[];
  input: ValueInfoProto[];
  output: ValueInfoProto[];
  valueInfo?: ValueInfoProto[];
  docString?: string;
}

interface OperatorSetIdProto {
  /** "" (or absent when decoded): the standard ai.onnx operators */
  domain?: string;
  version: Int64;
}

interface StringStringEntryProto {
  key: string;
  value: string;
}

export interface ModelProto {
  irVersion: Int64;
  opsetImport: OperatorSetIdProto[];
  producerName?: string;
  producerVersion?: string;
  domain?: string;
  modelVersion?: Int64;
  docString?: string;
  graph: GraphProto;
  metadataProps?: StringStringEntryProto[];
}

/** The model's bytes, as an .onnx file holds them. */
export function encodeModel(model: ModelProto): Uint8Array {
  const message = ModelProtoType.fromObject(model);
  return ModelProtoType.encode(message).finish();
}

/** An .onnx file's model (fields this schema does not declare are skipped; int64s come back as numbers). */
export function decodeModel(bytes: Uint8Array): ModelProto {
  const message = ModelProtoType.decode(bytes);
  return ModelProtoType.toObject(message, { longs: Number, arrays: true, defaults: false, oneofs: false }) as ModelProto;
}
