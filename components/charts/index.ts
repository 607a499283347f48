export { flatPadding, formatValue, type ValueAxis, valueAxis } from "./value-axis";
